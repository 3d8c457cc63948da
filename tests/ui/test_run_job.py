"""RunJob: a run's engine on the job lifecycle -- events decoded once, strays and warnings to the
log, and how the end reads (the rest is covered through the supervisor, tests/ui/test_supervisor.py)."""
from __future__ import annotations

import sys
import textwrap

import pytest

from gui_app.core import events as ev
from gui_app.ui.workers.run_job import RunJob

TIMEOUT_MS = 30_000

RUN = """
import json, sys
def say(**line):
    print(json.dumps(line), flush=True)
print("a stray print", flush=True)
say(note="JSON, but no event")
say(type="run_started", run_dir="/runs/a", config={})
say(type="warning", message="the batch does not divide evenly")
say(type="error", kind="training", message="loss is NaN at step 3")
if "--finish" in sys.argv:
    say(type="run_finished", status="failed", run_dir="/runs/a", step=3, message="loss is NaN at step 3 (finished)")
print("W tf: some noise", file=sys.stderr)
sys.exit(1)
"""


def _run(qtbot, *args: str) -> tuple[list, list[str], list[tuple[str, str]]]:
    job = RunJob([sys.executable, "-c", textwrap.dedent(RUN), *args])
    events, logs, ends = [], [], []
    job.on_result(events.append).on_log_line(logs.append).on_end(lambda *end: ends.append(end))
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        job.start()
    return events, logs, ends


@pytest.mark.parametrize(("args", "end"), [
    ((), ("failed", "loss is NaN at step 3")),  # the error event outranks a log line on stderr
    (("--finish",), ("failed", "loss is NaN at step 3 (finished)")),  # run_finished says it all
])
def test_events_are_decoded_once_and_the_end_reads_from_them(qtbot, args, end):
    events, logs, ends = _run(qtbot, *args)
    assert [type(e) for e in events][:3] == [ev.RunStarted, ev.Warning, ev.Error]
    assert logs[:3] == ["[engine stdout] a stray print", "[engine stdout] {'note': 'JSON, but no event'}",
                        "warning: the batch does not divide evenly"]
    assert ends == [end]


RESUMED = """
import json
def say(**line):
    print(json.dumps(line), flush=True)
say(type="run_started", run_dir="/runs/a", config={})
say(type="run_finished", status="stopped", run_dir="/runs/a", step=3)
say(type="run_started", run_dir="/runs/a", config={})  # resumed, read from the file's first line
"""


def test_a_resumed_runs_earlier_end_is_not_its_end(qtbot):
    """Read from its first event (a host's run resumed), a run's earlier run_finished is not how
    this attachment ended: the attachment then tries again rather than tell it ended."""
    job = RunJob([sys.executable, "-c", textwrap.dedent(RESUMED)])
    ends: list[tuple[str, str]] = []
    job.on_end(lambda *end: ends.append(end))
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        job.start()
    assert job.run_finished is None
    assert ends == [("failed", "the engine exited without reporting the end of the run")]
