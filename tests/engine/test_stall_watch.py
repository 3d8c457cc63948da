"""The launcher's stall watch without TensorFlow: a worker's status reports reach the board over
UDP with its phase (read from its own stack) and, after a while in one phase, its stack; the
watch names a stopped process (a real one, SIGSTOPped), lets workers busy together be, and tells
the stall's end."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from engine_helpers import until

from gui_app.core.events import Stall, WorkerStatus
from gui_app.engine.cluster import stalls
from gui_app.engine.cluster.processes import WorkerProcess
from gui_app.engine.cluster.stalls import StallWatch, StatusBoard, culprit
from gui_app.engine.cluster.status_reports import StatusReporter, parse_address, phase_of

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


@pytest.fixture
def board():
    b = StatusBoard()
    yield b
    b.close()


def test_a_report_carries_the_phase_read_from_the_training_threads_stack(board):
    (host, port), token = parse_address(board.address_for("127.0.0.1"))
    reporter = StatusReporter((host, port), token, worker=1, interval=0.05)
    reporter.last_step = 17
    reporter._main = threading.get_ident()  # this thread plays the training thread
    reporter.start()
    try:
        # Waiting here, inside a function of ours named as a phase: gui_app/.../checkpoints.py.
        report = until(lambda: board.latest().get(1, (0, None))[1], 10, "a report")
        assert report["phase"] == "starting" and report["last_step"] == 17 and report["pid"] == os.getpid()
        found = until(lambda: (r := board.latest()[1][1]).get("stack") and r, 10, "a report with the stack")
        assert found["phase_seconds"] >= 1.0 and any("test_stall_watch.py" in line for line in found["stack"])
    finally:
        reporter.close()
    assert reporter.sent >= 2
    # Another run's token is not this run's: dropped (this run's report sent after it arrives).
    stray = StatusReporter((host, port), "other", worker=3, interval=0.05)
    stray._socket.sendto(b'{"token": "other", "worker": 3}', (host, port))
    stray._socket.sendto(b'{"token": "%s", "worker": 4}' % token.encode(), (host, port))
    stray.close()
    until(lambda: 4 in board.latest(), 10, "the report after the stray one")
    assert 3 not in board.latest()


class _Code:
    def __init__(self, path: str, name: str):
        self.co_filename, self.co_name = path, name


class _Frame:
    def __init__(self, path: str, name: str, back: "_Frame | None"):
        self.f_code, self.f_back = _Code(path, name), back


def _stack(*calls: tuple[str, str]) -> _Frame | None:
    """A chain of frames, outermost first; the innermost is returned."""
    frame = None
    for path, name in calls:
        frame = _Frame(path, name, frame)
    return frame


def test_phase_of_names_what_the_controller_is_in():
    runner = ("/x/gui_app/engine/training/controller.py", "train")
    tf_loop = ("/x/site-packages/tensorflow/python/loop.py", "train")  # not ours: no phase
    assert phase_of(_stack(runner, ("/x/gui_app/engine/training/loop.py", "train"), tf_loop)) == "training"
    assert phase_of(_stack(runner, ("/x/gui_app/engine/training/controller.py", "_end_epoch"),
                           ("/x/gui_app/engine/training/actions/checkpoints.py", "on_epoch_end"))) == "checkpointing"
    assert phase_of(_stack(runner, ("/x/gui_app/engine/training/controller.py", "_end_epoch"),
                           ("/x/gui_app/engine/training/evaluation.py", "evaluate"))) == "evaluating"
    assert phase_of(_stack(runner, ("/x/gui_app/engine/training/controller.py", "_pause_if_asked"))) == "paused"
    assert phase_of(_stack(runner, ("/x/gui_app/engine/cluster/agreement.py", "stop_requested"))) == "agreeing"
    assert phase_of(_stack(runner)) == "between steps"
    assert phase_of(_stack(tf_loop)) == "starting" and phase_of(None) == "starting"


def _sleeper(index: int) -> WorkerProcess:
    proc = subprocess.Popen(["sleep", "60"], text=True)
    return WorkerProcess(index, f"127.0.0.1:{1000 + index}", proc)


def test_a_stopped_worker_is_named_and_the_next_step_clears_the_stall(board):
    workers = [_sleeper(0), _sleeper(1)]
    try:
        watch = StallWatch(board, workers)
        t = 100.0
        for step in (5, 10, 15, 20):  # a group every 50 ms
            watch.on_step(step, now=t)
            t += 0.05
        now = time.monotonic()
        board.reports = {w: (now, {"phase": "training", "last_step": 20, "stack": ["loop.py:1 train"]})
                         for w in (0, 1)}
        assert watch.check(False, now=t + 1.0) is None  # under the 2 s floor
        os.kill(workers[1].proc.pid, signal.SIGSTOP)
        until(lambda: stalls.os_state(workers[1].proc.pid) == "T (stopped)", 10, "stopped")
        assert watch.check(True, now=t + 3.0) is None  # paused: never a stall
        stall = watch.check(False, now=t + 3.0)
        assert stall is not None and (stall.worker, stall.since_step) == (1, 20)
        assert stall.expected_seconds == 0.05 and stall.seconds >= 2.9
        states = {w.worker: (w.state, w.os_state, w.phase) for w in stall.workers}
        assert states[1] == ("stopped", "T (stopped)", "training") and states[0][0] == "running"
        assert watch.check(False, now=t + 4.0) is None  # told once
        assert "; before it: no step has finished" in watch.context()
        cleared = watch.on_step(25, now=t + 5.0)
        assert cleared is not None and cleared.step == 25 and cleared.seconds >= 4.9
        assert watch.stall is None and watch.context() == ""
    finally:
        os.kill(workers[1].proc.pid, signal.SIGCONT)
        for w in workers:
            w.proc.kill()
            w.proc.wait()


def test_workers_busy_together_are_no_stall(board):
    workers = [_sleeper(0), _sleeper(1)]
    try:
        watch = StallWatch(board, workers)
        for i, step in enumerate((5, 10, 15)):
            watch.on_step(step, now=100.0 + i * 0.05)
        now = time.monotonic()
        board.reports = {w: (now, {"phase": "checkpointing", "last_step": 15}) for w in (0, 1)}
        assert watch.check(False, now=110.0) is None
        # The chief validates and saves while the other waits for it in the agreement: the run's work.
        board.reports = {0: (now, {"phase": "evaluating", "last_step": 15}),
                         1: (now, {"phase": "agreeing", "last_step": 15})}
        assert watch.check(False, now=110.0) is None
        board.reports = {w: (now, {"phase": "training", "last_step": 15}) for w in (0, 1)}
        assert watch.check(False, now=103.0) is None  # none stands out: slow, not held up, until 6 s
        stall = watch.check(False, now=110.0)
        assert stall is not None and stall.worker is None and "none stands out" in stall.reason
    finally:
        for w in workers:
            w.proc.kill()
            w.proc.wait()


def test_the_culprit_order():
    def status(worker, state="running", phase="training", last_step=10):
        return WorkerStatus(worker=worker, state=state, phase=phase, last_step=last_step)

    assert culprit([status(0), status(1, "not answering"), status(2, "gone")])[0] == 2
    assert culprit([status(0, "not answering"), status(1, "stopped")])[0] == 1
    worker, why = culprit([status(0), status(1, phase="checkpointing"), status(2)])
    assert worker == 1 and "checkpointing while the others wait" in why
    assert culprit([status(0), status(1, last_step=5), status(2)])[0] == 1
    assert culprit([status(0), status(1)])[0] is None


def test_a_worker_on_a_host_that_stopped_answering_has_its_proc_read_there(board, monkeypatch):
    """Its process is the ssh client here: its state is asked there, by the pid it reported, and
    only once it stopped answering (a worker that answers costs no ssh call)."""
    from gui_app.core.ssh_hosts import Host

    asked: list[tuple[str, int]] = []

    def read_there(host, pid):
        asked.append((host.name, pid))
        return "T (stopped)"

    monkeypatch.setattr(stalls, "remote_os_state", read_there)
    workers = [_sleeper(0), _sleeper(1)]
    workers[1].host = "gpu2"
    try:
        watch = StallWatch(board, workers, {1: Host("gpu2")})
        now = time.monotonic()
        board.reports = {w: (now, {"phase": "training", "last_step": 20, "pid": 4000 + w, "host": "gpu2"})
                         for w in (0, 1)}
        assert watch.status(workers[1], now).state == "running" and asked == []
        status = watch.status(workers[1], now + 5)  # its last report is 5 s old
        assert (status.state, status.os_state, status.pid, status.host) == ("stopped", "T (stopped)", 4001, "gpu2")
        assert asked == [("gpu2", 4001)]
        watch.stall = Stall(workers=[watch.status(workers[0], now + 5), status])
        assert watch.stopped() == [1]
    finally:
        for w in workers:
            w.proc.kill()
            w.proc.wait()


def test_the_state_of_a_proc_stat_line():
    assert stalls._state_of("4037 (python3 (x) y) T 1 2 3") == "T (stopped)"
    assert stalls._state_of("4037 (sleep) S 1") == "S (sleeping)"
    assert stalls._state_of("") is None
