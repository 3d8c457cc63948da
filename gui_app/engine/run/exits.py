"""The engine's exit codes, one meaning each, for scripts and schedulers that run it.

0 completed or stopped; 1 failed in training (or a converter failed); 2 bad config or input,
with one line on stderr naming the key or the file; 130 interrupted (Ctrl+C during an export).
They are defined with the code that reads the engine's output (the window needs them too).
"""
import contextlib
import sys

from gui_app.core.engine_output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK"]


RUN_COMMANDS = ("train", "resume", "evaluate")


def say(command: str, text: str) -> None:
    """``command``'s one line on stderr (why it refused, or what it did); never raises: stderr
    may be gone with the connection or the window that read it."""
    with contextlib.suppress(OSError, ValueError):
        print(f"replica-studio {command}: {text}", file=sys.stderr, flush=True)


def exit_now(code: int) -> None:
    """End an engine process that has finished its run, without the interpreter's teardown.

    Everything the run writes is closed by then (events, checkpoints, TensorBoard, eval.json);
    what is left is Python's final garbage collection and module teardown of TensorFlow, which
    took 1-3.5 s here after ``run_finished`` (once 20 s), time the window waits for the exit."""
    import os
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing left to say
            pass
    os._exit(code)
