"""Which runs are running (core/live_runs.py): the holder of the run's lock, checked against the
process the run recorded; a lock nobody holds is a run whose process is gone."""
from __future__ import annotations

import os
import socket

from gui_app.core import live_runs, run_lock
from gui_app.core.config import RunConfig
from gui_app.core.rundir import CONFIG_FILE


def _run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    RunConfig().save(run / CONFIG_FILE)
    return run


def test_a_run_is_running_while_the_process_it_recorded_holds_its_lock(tmp_path):
    run = _run(tmp_path)
    assert run_lock.holder(run) is None and live_runs.live_process(run) is None  # never held
    with run_lock.RunLock(run):
        assert run_lock.holder(run) == os.getpid()
        assert live_runs.live_process(run) is None  # held, but by no run process (export, evaluate)
        recorded = live_runs.record_process(run, "resume", detached=True)
        assert live_runs.live_process(run) == recorded
        assert (recorded.pid, recorded.host, recorded.detached) == (os.getpid(), socket.gethostname(), True)
        listed = live_runs.list_live_runs(tmp_path)
        assert [(r.status, r.to_json()["pid"]) for r in listed] == [("running", os.getpid())]
    assert run_lock.holder(run) is None
    assert live_runs.live_process(run) is None  # process.json stays; the lock says it is gone
    assert live_runs.read_live_run(run).status == "new"


def test_looking_never_keeps_a_starting_run_out(tmp_path):
    """holder() takes a shared lock for a moment; acquire() retries past it."""
    import fcntl
    import threading

    run = _run(tmp_path)
    (run / run_lock.LOCK_FILE).touch()
    fd = os.open(run / run_lock.LOCK_FILE, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)  # a reader looking, as holder() does
    timer = threading.Timer(0.05, os.close, (fd,))  # and letting go 50 ms later
    timer.start()
    try:
        with run_lock.RunLock(run):
            assert run_lock.holder(run) == os.getpid()
    finally:
        timer.join()


def test_a_clusters_worker_record_round_trips_and_a_bad_one_is_empty(tmp_path):
    workers = [live_runs.WorkerProcessRecord(0, 101, None, "chief-machine"),
               live_runs.WorkerProcessRecord(1, 4037, "gpu2", "gpu2.lan")]
    live_runs.record_workers(tmp_path, workers)
    assert live_runs.read_workers(tmp_path) == {0: workers[0], 1: workers[1]}
    (tmp_path / live_runs.WORKERS_FILE).write_text('{"workers": [{"worker": 1}]}')
    assert live_runs.read_workers(tmp_path) == {}
    assert live_runs.read_workers(tmp_path / "none") == {}
