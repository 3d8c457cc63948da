"""EngineProcess, the one process runner, and the one rule for a failure's error line."""
from __future__ import annotations

import sys

import pytest

from gui_app.core.engine_output import complete_lines, error_line, parse_json_line, without_command_prefix
from gui_app.ui.workers.process import EngineProcess

TIMEOUT_MS = 30_000


def test_error_line_is_the_last_line_unless_the_process_was_killed():
    lines = ["I tensorflow/core: cuInit error: no CUDA device", "  ", "replica-studio export: output: no such folder"]
    assert error_line(lines) == "replica-studio export: output: no such folder"
    killed = ["Traceback (most recent call last):", "MemoryError: out of memory", "W tensorflow: allocation failed"]
    assert error_line(killed, crashed=True) == "MemoryError: out of memory"  # not TensorFlow's last words
    assert error_line(["W tensorflow: some warning"], crashed=True) is None
    assert error_line([]) is None


def test_the_command_prefix_of_an_error_line_goes_and_nothing_else():
    assert without_command_prefix("replica-studio export: output: no such folder") == "output: no such folder"
    assert without_command_prefix("replica-studio cluster-script: x: y") == "x: y"
    assert without_command_prefix("ValueError: replica-studio export: z") == "ValueError: replica-studio export: z"


def test_complete_lines_keep_the_unfinished_rest_until_the_end():
    assert complete_lines(b'{"a": 1}\n{"b"') == ([b'{"a": 1}'], b'{"b"')
    assert complete_lines(b'{"b": 2}', final=True) == ([b'{"b": 2}'], b"")
    assert parse_json_line('{"type": "x"}') == {"type": "x"}
    assert parse_json_line("[1, 2]") is None and parse_json_line("hello") is None


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_events_strays_and_stderr_go_to_their_signals(qtbot):
    runner = EngineProcess()
    events, logs = [], []
    runner.json_event.connect(events.append)
    runner.log_line.connect(logs.append)
    code = ("import sys; print('{\"type\": \"progress\", \"fraction\": 0.5}'); print('a stray print'); "
            "sys.stdout.write('{\"type\": \"done\"}'); sys.stderr.write('W tf: noise\\nValueError: bad input\\n'); "
            "sys.exit(2)")
    with qtbot.waitSignal(runner.finished, timeout=TIMEOUT_MS) as finished:
        runner.start(_python(code), stdin=False)
    assert finished.args == [2, False, "ValueError: bad input"]
    assert events == [{"type": "progress", "fraction": 0.5}, {"type": "done"}]  # the last one had no newline
    assert logs == ["[engine stdout] a stray print", "W tf: noise", "ValueError: bad input"]
    assert not runner.is_running()


def test_stdin_lines_reach_the_process(qtbot):
    runner = EngineProcess()
    events = []
    runner.json_event.connect(events.append)
    code = "import sys, json\nfor line in sys.stdin: print(json.dumps({'echo': line.strip()}), flush=True)"
    with qtbot.waitSignal(runner.finished, timeout=TIMEOUT_MS) as finished:
        runner.start(_python(code))
        assert runner.write_line("hello")
        runner.close_stdin()
    assert finished.args[0] == 0 and events == [{"echo": "hello"}]


@pytest.mark.parametrize("ignores_sigterm", [False, True])
def test_terminate_then_kill_after_the_grace_period(qtbot, ignores_sigterm):
    runner = EngineProcess()
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if ignores_sigterm else ""
    code = f"import signal, sys, time; {ignore}print('{{}}', flush=True); time.sleep(60)"
    with qtbot.waitSignal(runner.json_event, timeout=TIMEOUT_MS):
        runner.start(_python(code))
    with qtbot.waitSignal(runner.finished, timeout=TIMEOUT_MS) as finished:
        runner.terminate(grace_s=0.3)
    assert finished.args[1] is True  # ended by a signal
    assert runner.terminated and runner.killed is ignores_sigterm


def test_a_missing_program_fails_to_start(qtbot, tmp_path):
    runner = EngineProcess()
    with qtbot.waitSignal(runner.start_failed, timeout=TIMEOUT_MS) as failed:
        runner.start([str(tmp_path / "no-such-program")])
    assert "no-such-program" in failed.args[0]
