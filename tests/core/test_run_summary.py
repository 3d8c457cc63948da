"""The run list reads each run's events once: summary.json caches the fold and the offset it
has read up to (rundir.summarize_events)."""
from __future__ import annotations

import json

from gui_app.core import events as ev
from gui_app.core import run_summary, rundir
from gui_app.core.config import RunConfig


def _event(event: ev.Event) -> str:
    event.time = 1.0
    return json.dumps(ev.encode(event)) + "\n"


def _started(total_steps: int) -> str:
    return _event(ev.RunStarted(run_dir="run", config={}, total_steps=total_steps))


def _run(tmp_path, lines: list[str]):
    run = tmp_path / "run"
    run.mkdir()
    RunConfig().save(run / rundir.CONFIG_FILE)
    (run / rundir.EVENTS_FILE).write_text("".join(lines), encoding="utf-8")
    return run


def test_the_summary_reads_only_what_was_appended(tmp_path):
    run = _run(tmp_path, [_started(4)] + [_event(ev.Step(step=s)) for s in (1, 2)])
    info = rundir.read_run(run)
    assert (info.status, info.step, info.total_steps) == ("interrupted", 2, 4)
    cached = json.loads((run / rundir.SUMMARY_FILE).read_text())
    assert cached["offset"] == (run / rundir.EVENTS_FILE).stat().st_size
    with (run / rundir.EVENTS_FILE).open("a", encoding="utf-8") as f:
        f.write(_event(ev.Eval(accuracy=0.75)) + _event(ev.RunFinished(status="completed", step=4)))
    info = rundir.read_run(run)
    assert (info.status, info.step, info.test_accuracy) == ("completed", 4, 0.75)


def test_a_torn_last_line_is_read_once_it_is_complete(tmp_path):
    finished = _event(ev.RunFinished(status="stopped", step=3))
    run = _run(tmp_path, [_started(9), finished[:10]])
    assert rundir.read_run(run).status == "interrupted"
    with (run / rundir.EVENTS_FILE).open("a", encoding="utf-8") as f:
        f.write(finished[10:])
    assert rundir.read_run(run).status == "stopped"


def test_a_damaged_or_stale_summary_is_rebuilt_from_the_events(tmp_path):
    run = _run(tmp_path, [_started(2), _event(ev.RunFinished(status="completed", step=2))])
    (run / rundir.SUMMARY_FILE).write_text("{not json")
    assert rundir.read_run(run).status == "completed"
    # An events file shorter than the cache says (rewritten): start again from its first byte.
    (run / rundir.EVENTS_FILE).write_text(_started(5), encoding="utf-8")
    (run / rundir.SUMMARY_FILE).write_text(json.dumps({"version": 1, "offset": 10_000, "state": {
        "status": "completed", "started": 1.0, "step": 2, "total_steps": 2, "test_accuracy": None, "message": None}}))
    info = rundir.read_run(run)
    assert (info.status, info.total_steps) == ("interrupted", 5)


def test_a_summary_that_cannot_be_read_or_written_is_only_a_missed_cache(tmp_path):
    run = _run(tmp_path, [_started(2)])
    (run / rundir.SUMMARY_FILE).mkdir()  # neither readable as a file nor replaceable by one
    assert rundir.read_run(run).status == "interrupted"
    assert not list(run.glob(".*.partial*"))


def test_a_run_whose_config_cannot_be_read_and_that_never_started_is_unreadable_not_new(tmp_path):
    run = tmp_path / "20261203-100000-digits-mlp"
    run.mkdir()
    (run / rundir.CONFIG_FILE).write_text("{half a config", encoding="utf-8")
    info = rundir.read_run(run)
    assert info.status == "unreadable" and info.config is None
    assert info.message and "config.json" in info.message
    started = tmp_path / "20261203-100001-digits-mlp"  # it ran: its events say how it ended
    started.mkdir()
    (started / rundir.CONFIG_FILE).write_text("[]", encoding="utf-8")
    (started / rundir.EVENTS_FILE).write_text(_started(10) + "\n", encoding="utf-8")
    assert rundir.read_run(started).status != "unreadable"


def _bytes_read() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def test_the_first_look_at_a_large_run_reads_its_two_ends_only(tmp_path):
    """No summary.json (an old run, a copy): the run list reads the head and the tail of a large
    events file, never the whole of it, and finds what a fold of every line finds."""
    from pyramid_runs import write_run

    from gui_app.core.history.status import RunStatus

    run = write_run(tmp_path / "run", 15_000)  # 8.4 MB
    size = (run / rundir.EVENTS_FILE).stat().st_size
    assert size > 7 * run_summary._ENDS_BYTES
    before = _bytes_read()
    status = rundir.summarize_events(run)
    assert _bytes_read() - before < 3 * run_summary._ENDS_BYTES
    full = RunStatus()
    for event in rundir.read_raw_events(run, parts=False):
        full.add(event)
    assert status == full and status.status == "completed" and status.step == 15_000 and status.total_steps == 15_000
    assert json.loads((run / rundir.SUMMARY_FILE).read_text())["offset"] == size  # the next look reads nothing
