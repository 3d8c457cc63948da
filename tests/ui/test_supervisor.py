"""RunSupervisor against the fake engine: batching and order, stop, pause, crash, kill, close."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gui_app.core import events as ev
from gui_app.core.config import RunConfig, RuntimeConfig, StrategyConfig
from gui_app.core.live_runs import live_process
from gui_app.core.rundir import list_runs, read_run
from gui_app.identity import app_env
from gui_app.ui.workers.supervisor import RunSupervisor

CONFIG = RunConfig(strategy=StrategyConfig(name="mirrored", devices=("CPU:0", "CPU:1")),
                   runtime=RuntimeConfig(cpu_devices=2))


@pytest.fixture
def make_supervisor(fake_engine):
    made = []

    def make(**kwargs) -> RunSupervisor:
        supervisor = RunSupervisor(fake_engine, **kwargs)
        made.append(supervisor)
        return supervisor

    yield make
    for supervisor in made:
        supervisor.close()


class Recorder:
    def __init__(self, supervisor: RunSupervisor) -> None:
        self.batches: list[list[ev.Event]] = []
        self.logs: list[str] = []
        self.states: list[str] = []
        supervisor.events.connect(self.batches.append)
        supervisor.log_line.connect(self.logs.append)
        supervisor.state_changed.connect(self.states.append)

    @property
    def events(self) -> list[ev.Event]:
        return [e for batch in self.batches for e in batch]


def test_events_arrive_batched_in_order_and_run_completes(qtbot, make_supervisor, fake_engine, runs_dir):
    fake_engine.configure("normal", steps=300)
    supervisor = make_supervisor()
    rec = Recorder(supervisor)
    with qtbot.waitSignal(supervisor.run_started, timeout=10_000) as started, \
            qtbot.waitSignal(supervisor.finished, timeout=20_000) as finished:
        supervisor.start_train(CONFIG, runs_dir)
    status, run_dir, message = finished.args
    assert (status, message) == ("completed", "")
    assert Path(run_dir).parent == runs_dir and started.args[0].run_dir == run_dir
    kinds = [type(e) for e in rec.events]  # decoded once, in the supervisor
    assert kinds[0] is ev.RunStarted and kinds[-2:] == [ev.Eval, ev.RunFinished]
    assert [e.step for e in rec.events if isinstance(e, ev.Step)] == list(range(1, 301))
    assert len(rec.batches) < len(rec.events) / 5, "events must be batched, not one signal each"
    assert rec.states[0] == "starting" and "running" in rec.states and rec.states[-1] == "idle"
    assert not supervisor.is_active()
    assert [r.status for r in list_runs(runs_dir)] == ["completed"]


def test_stop_is_cooperative(qtbot, make_supervisor, fake_engine, runs_dir):
    fake_engine.configure("wait")
    supervisor = make_supervisor()
    rec = Recorder(supervisor)
    with qtbot.waitSignal(supervisor.run_started, timeout=10_000):
        supervisor.start_train(CONFIG, runs_dir)
    with qtbot.waitSignal(supervisor.finished, timeout=10_000) as finished:
        supervisor.stop()
    assert finished.args[0] == "stopped"
    assert "stopping" in rec.states
    assert isinstance(rec.events[-1], ev.RunFinished)
    run = list_runs(runs_dir)[0]
    assert run.status == "stopped" and run.resumable


def test_pause_and_continue_change_state(qtbot, make_supervisor, fake_engine, runs_dir):
    fake_engine.configure("wait")
    supervisor = make_supervisor()
    with qtbot.waitSignal(supervisor.run_started, timeout=10_000):
        supervisor.start_train(CONFIG, runs_dir)
    with qtbot.waitSignal(supervisor.state_changed, check_params_cb=lambda s: s == "paused", timeout=5000):
        supervisor.pause()
    with qtbot.waitSignal(supervisor.state_changed, check_params_cb=lambda s: s == "running", timeout=5000):
        supervisor.continue_run()
    with qtbot.waitSignal(supervisor.finished, timeout=10_000):
        supervisor.stop()


def test_crash_reports_failed_with_the_error_line(qtbot, make_supervisor, fake_engine, runs_dir):
    fake_engine.configure("crash")
    supervisor = make_supervisor()
    rec = Recorder(supervisor)
    with qtbot.waitSignal(supervisor.finished, timeout=10_000) as finished:
        supervisor.start_train(CONFIG, runs_dir)
    status, run_dir, message = finished.args
    assert status == "failed" and run_dir
    assert message == "RuntimeError: fake engine crashed on purpose"
    assert "RuntimeError: fake engine crashed on purpose" in rec.logs
    assert list_runs(runs_dir)[0].status == "interrupted"  # no run_finished on disk


def test_killed_engine_is_not_blamed_on_a_log_line(qtbot, make_supervisor, fake_engine, runs_dir):
    fake_engine.configure("killed")
    supervisor = make_supervisor()
    with qtbot.waitSignal(supervisor.finished, timeout=10_000) as finished:
        supervisor.start_train(CONFIG, runs_dir)
    assert finished.args[0] == "failed"
    assert finished.args[2] == "the engine process crashed or was killed (out of memory?)"


def test_bad_input_fails_before_the_run_starts(qtbot, make_supervisor, runs_dir, tmp_path):
    supervisor = make_supervisor()
    config = CONFIG.replace(dataset={"name": "npz", "path": str(tmp_path / "missing.npz")})
    with qtbot.waitSignal(supervisor.finished, timeout=10_000) as finished:
        supervisor.start_train(config, runs_dir)
    status, run_dir, message = finished.args
    assert (status, message) == ("failed", f"{tmp_path / 'missing.npz'}: no such file or folder")
    # As the real engine does (train --detach refused before it trained): no run directory is left behind.
    assert run_dir == "" and list_runs(runs_dir) == []


def test_engine_that_cannot_start(qtbot, tmp_path):
    supervisor = RunSupervisor(lambda *args: [str(tmp_path / "no-such-engine"), *args])
    try:
        with qtbot.waitSignal(supervisor.finished, timeout=5000) as finished:
            supervisor.start_resume(tmp_path)
        assert finished.args[0] == "failed" and finished.args[2].startswith("cannot start the engine")
        assert not supervisor.is_active()
    finally:
        supervisor.close()


def test_engine_ignoring_stop_is_killed_after_the_grace_period(qtbot, make_supervisor, fake_engine, runs_dir):
    fake_engine.configure("hang")
    supervisor = make_supervisor(grace_seconds=0.3)
    with qtbot.waitSignal(supervisor.run_started, timeout=10_000):
        supervisor.start_train(CONFIG, runs_dir)
    with qtbot.waitSignal(supervisor.finished, timeout=10_000) as finished:
        supervisor.stop()
    assert finished.args[0] == "interrupted"
    assert "did not stop within 0.3 s" in finished.args[2]


def test_one_run_at_a_time(qtbot, make_supervisor, fake_engine, runs_dir):
    fake_engine.configure("wait")
    supervisor = make_supervisor()
    with qtbot.waitSignal(supervisor.run_started, timeout=10_000):
        supervisor.start_train(CONFIG, runs_dir)
    with pytest.raises(RuntimeError, match="one run at a time"):
        supervisor.start_train(CONFIG, runs_dir)
    with qtbot.waitSignal(supervisor.finished, timeout=10_000):
        supervisor.stop()


def test_close_lets_go_of_the_run_which_goes_on(qtbot, make_supervisor, fake_engine, runs_dir):
    fake_engine.configure("wait")
    supervisor = make_supervisor()
    rec = Recorder(supervisor)
    with qtbot.waitSignal(supervisor.run_started, timeout=10_000) as started:
        supervisor.start_train(CONFIG, runs_dir)
    run_dir = started.args[0].run_dir
    process = live_process(run_dir)
    assert process is not None and process.detached
    # The run, not the attach process:
    assert b"\0train\0" in Path(f"/proc/{process.pid}/cmdline").read_bytes()
    assert os.getsid(process.pid) == process.pid != os.getsid(0)  # a session of its own: not the window's child
    with qtbot.waitSignal(supervisor.finished, timeout=5000) as finished:
        supervisor.close()
    assert finished.args[0] == "detached" and finished.args[1] == run_dir
    assert rec.states[-1] == "idle"
    assert live_process(run_dir) == process  # the run goes on
    stop = subprocess.run(fake_engine("stop", run_dir), capture_output=True, text=True, timeout=60,
                          env=app_env())
    assert stop.returncode == 0, stop.stderr
    assert read_run(run_dir).status == "stopped" and live_process(run_dir) is None
