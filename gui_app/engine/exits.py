"""The engine's exit codes, one meaning each, for scripts and schedulers that run it.

0 completed or stopped; 1 failed in training (or a converter failed); 2 bad config or input,
with one line on stderr naming the key or the file; 130 interrupted (Ctrl+C during an export).
They are defined with the code that reads the engine's output (the window needs them too).
"""
from gui_app.core.engine_output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK"]
