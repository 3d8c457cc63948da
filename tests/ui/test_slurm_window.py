"""The window and Slurm: the job's state in the run list, Run -> Submit to Slurm…, Stop (scancel)
and Resume (job.sbatch again) -- the real engine's submit, attach and resume over fake Slurm
commands (tests/fake_slurm.py); the test writes the chief's events as the job would."""
from __future__ import annotations

import json
import sys
import time

import pytest
from run_dirs import listed_status, wait_listed, write_run
from windows import real_engine, shown_window

from gui_app.core import events as ev
from gui_app.core.backends import slurm
from gui_app.core.config import RunConfig, StrategyConfig, TrainingConfig
from gui_app.identity import app_command
from gui_app.ui.window.run_rows import PATH_ROLE
from gui_app.ui.window.slurm_actions import SlurmActions
from tests.fake_slurm import FakeSlurm

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fake Slurm commands")
CONFIG = RunConfig(strategy=StrategyConfig(name="multi_worker_mirrored", workers=2),
                   training=TrainingConfig(epochs=1, global_batch_size=64, seed=2))


@pytest.fixture
def fake(tmp_path, monkeypatch) -> FakeSlurm:
    fake = FakeSlurm(tmp_path / "slurm")
    monkeypatch.setenv("PATH", fake.path())  # the reader asks squeue in this process; engine processes inherit it
    return fake


def shown_status(panel, run_dir) -> str:
    """The Status column as it reads, with what is in brackets (listed_status drops it)."""
    items = (panel.tree.topLevelItem(i) for i in range(panel.tree.topLevelItemCount()))
    return next((item.text(0) for item in items if item.data(0, PATH_ROLE) == str(run_dir)), "")


def _slurm_run(runs_dir, name: str, job_id: str, status: str | None, **kwargs):
    run = write_run(runs_dir, name, status, **kwargs)
    (run / "job.sbatch").write_text("#!/bin/bash\n")
    slurm.record_job(run, job_id)
    return run


def test_the_run_list_shows_the_jobs_state(qtbot, runs_dir, fake):
    from stub_run import StubRun

    from gui_app.ui.window.runs_panel import RunsPanel
    from gui_app.ui.window.window_state import WindowState

    pending = _slurm_run(runs_dir, "a-pending", "7", None, steps=0)
    running = _slurm_run(runs_dir, "b-running", "8", None, steps=3, started=1.7e9 + 10)
    cancelled = _slurm_run(runs_dir, "c-cancelled", "9", None, steps=0, started=1.7e9 + 20, checkpoint=False)
    stopped = _slurm_run(runs_dir, "d-stopped", "10", "stopped", steps=5, started=1.7e9 + 30)
    fake.set("7", "PENDING", "Resources")
    fake.set("8", "RUNNING")
    fake.set("9", "CANCELLED")
    fake.set("10", "CANCELLED")
    panel = RunsPanel(WindowState(StubRun(), runs_dir))
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: not panel.is_filling())
    assert shown_status(panel, pending) == "pending (Resources)"
    assert listed_status(panel, running) == "running"
    assert listed_status(panel, cancelled) == "cancelled"  # no run_finished: Slurm's word
    assert listed_status(panel, stopped) == "stopped"  # the run's own word
    assert [call[0] for call in fake.calls()].count("squeue") == 1  # one call for the four jobs
    assert panel.running_runs() == [str(running), str(pending)]
    panel.select(running)
    assert panel.attach_button.isEnabled() and not panel.resume_button.isEnabled()
    panel.select(stopped)
    assert panel.resume_button.isEnabled() and not panel.attach_button.isEnabled()
    fake.set("7", "RUNNING")  # the list reads again every few seconds while a job waits or runs
    qtbot.waitUntil(lambda: listed_status(panel, pending) == "running", timeout=10_000)


def _write(run_dir, *events: ev.Event) -> None:
    with (run_dir / "events.jsonl").open("a") as f:
        f.writelines(json.dumps(ev.encode(e)) + "\n" for e in events)


def _step(step: int) -> ev.Step:
    replicas = [ev.ReplicaStats(replica=i, device=f"/job:worker/replica:0/task:{i}/device:CPU:0", loss=0.5,
                                accuracy=0.5, examples=32, grad_norm=1.0, step_time=0.1, examples_per_sec=320.0,
                                worker=i) for i in range(2)]
    return ev.Step(time=1.7e9 + step, step=step, epoch=1, loss=0.5, accuracy=0.5, learning_rate=0.001,
                   examples_per_sec=640.0, step_time=0.1, replicas=replicas)


@pytest.fixture
def window(qtbot, fake_engine):
    """The main window: device detection and the dataset check fake, submit, attach and resume the engine's."""
    with shown_window(qtbot, engine_command=real_engine(fake_engine)) as window:
        yield window


def _job_starts(qtbot, window, fake, run_dir) -> None:
    """Job 41 starts: its chief writes the run's events into the shared run directory, and the
    window's charts get two steps with both workers' replicas."""
    fake.set("41", "RUNNING")
    started = ev.RunStarted(time=1.7e9, run_dir=str(run_dir), config=CONFIG.to_dict(), total_steps=20,
                            steps_per_epoch=20, epochs=1, num_replicas=2)
    with qtbot.waitSignal(window.supervisor.run_started, timeout=20_000):
        _write(run_dir, started, _step(1), _step(2))
    qtbot.waitUntil(lambda: window.shown.history.status.step == 2, timeout=10_000)
    assert window.shown.history.replicas.workers == [0, 1]


def test_submit_follow_stop_and_resume_from_the_window(qtbot, window, fake, runs_dir):
    assert not window.window_actions.submit_slurm.isEnabled()  # the first-launch config is not multi-worker
    assert "needs a valid multi_worker_mirrored or parameter_server" in window.window_actions.submit_slurm.toolTip()
    window.config_panel.set_config(CONFIG, checked=True)
    qtbot.waitUntil(window.window_actions.submit_slurm.isEnabled)
    assert window.window_actions.submit_slurm.toolTip() == SlurmActions.tip  # on: no reason given
    dialog = window.slurm.open()
    dialog.partition.setText("debug")
    dialog.extra.setPlainText("--qos=long\n")
    with qtbot.waitSignal(window.supervisor.state_changed, timeout=20_000):  # idle -> starting: following it
        dialog.start()
    (run_dir,) = [p for p in runs_dir.iterdir() if p.is_dir()]
    args = fake.calls("sbatch")[0]
    assert args == ["sbatch", "--parsable", str(run_dir / "job.sbatch")]
    script = (run_dir / "job.sbatch").read_text()
    assert "#SBATCH --partition=debug" in script and "#SBATCH --qos=long" in script
    qtbot.waitUntil(lambda: shown_status(window.runs, run_dir) == "pending (Priority)", timeout=10_000)
    _job_starts(qtbot, window, fake, run_dir)
    # Stop: scancel; the workers stop with a checkpoint and the chief says so.
    window.window_actions.stop.trigger()
    qtbot.waitUntil(lambda: bool(fake.calls("scancel")), timeout=10_000)
    assert fake.calls("scancel") == [["scancel", "41"]]
    with qtbot.waitSignal(window.supervisor.finished, timeout=20_000) as finished:
        _write(run_dir, ev.RunFinished(time=1.7e9 + 3, status="stopped", run_dir=str(run_dir), step=2,
                                       message="stopped by SIGTERM"))
    assert finished.args[0] == "stopped"
    (run_dir / "checkpoints").mkdir()
    wait_listed(qtbot, window.runs)
    window.runs.select(run_dir)
    qtbot.waitUntil(window.window_actions.resume_run.isEnabled, timeout=10_000)
    # Resume: job.sbatch submitted again, followed from the next line; Stop while it waits cancels it.
    with qtbot.waitSignal(window.supervisor.state_changed, timeout=20_000):
        window.window_actions.resume_run.trigger()
    qtbot.waitUntil(lambda: len(fake.calls("sbatch")) == 2, timeout=20_000)
    qtbot.waitUntil(lambda: slurm.read_job(run_dir).job_id == "42", timeout=10_000)
    with qtbot.waitSignal(window.supervisor.finished, timeout=30_000) as finished:
        window.window_actions.stop.trigger()
    assert finished.args[0] == "stopped" and fake.calls("scancel")[-1] == ["scancel", "42"]
    assert "Slurm job 42 was cancelled" in finished.args[2]



def _pending_run(runs_dir, name: str, job_id: str):
    """A run as ``submit --slurm`` leaves it while its job waits: config, script, job; no events."""
    run = runs_dir / name
    run.mkdir(parents=True)
    CONFIG.save(run / "config.json")
    (run / "job.sbatch").write_text("#!/bin/bash\n")
    slurm.record_job(run, job_id)
    return run


def test_a_pending_slurm_run_opened_from_the_list_is_followed_once_it_starts(qtbot, window, fake, runs_dir):
    wait_listed(qtbot, window.runs)  # the launch's fill: nothing running to follow then
    run_dir = _pending_run(runs_dir, "waiting", "41")
    fake.set("41", "PENDING", "Resources")
    window.runs.refresh()
    qtbot.waitUntil(lambda: shown_status(window.runs, run_dir) == "pending (Resources)", timeout=10_000)
    window.runs.select(run_dir)
    assert window.runs.open_button.isEnabled() and window.runs.attach_button.isEnabled()
    with qtbot.waitSignal(window.supervisor.state_changed, timeout=20_000):  # idle -> starting: following it
        window.runs.open_button.click()
    assert window.state.status.startswith("Slurm job 41 is pending (Resources): following the run once it starts")
    assert window.shown.history.started is None
    _job_starts(qtbot, window, fake, run_dir)
    assert window.state.active_run == str(run_dir)
    with qtbot.waitSignal(window.supervisor.finished, timeout=20_000) as finished:
        _write(run_dir, ev.RunFinished(time=1.7e9 + 3, status="completed", run_dir=str(run_dir), step=2))
        fake.set("41", "COMPLETED")
    assert finished.args[0] == "completed"

    # Double-click on another pending run follows it too; Stop while it waits cancels its job.
    other = _pending_run(runs_dir, "waiting-too", "42")
    fake.set("42", "PENDING", "Priority")
    window.runs.refresh()
    qtbot.waitUntil(lambda: shown_status(window.runs, other) == "pending (Priority)", timeout=10_000)
    item = next(window.runs.tree.topLevelItem(i) for i in range(window.runs.tree.topLevelItemCount())
                if window.runs.tree.topLevelItem(i).data(0, PATH_ROLE) == str(other))
    with qtbot.waitSignal(window.supervisor.state_changed, timeout=20_000):
        window.runs.tree.itemDoubleClicked.emit(item, 0)
    assert window.state.status.startswith("Slurm job 42 is pending (Priority)")
    with qtbot.waitSignal(window.supervisor.finished, timeout=30_000) as finished:
        window.window_actions.stop.trigger()
    assert fake.calls("scancel") == [["scancel", "42"]] and "Slurm job 42 was cancelled" in finished.args[2]

@pytest.mark.slow
@pytest.mark.timeout(900)
def test_on_a_real_slurm_submit_watch_stop_and_resume_from_the_window(qtbot, window, runs_dir, monkeypatch):
    """tests/slurm_cluster.py's Slurm (node9 and node10): the window submits a 2-worker digits run,
    the run list shows its job, the charts get both workers' replicas, Stop is scancel (stopped
    with a checkpoint), Resume submits job.sbatch again and the run completes with every step once."""
    from collections import Counter

    from slurm_cluster import running_slurm

    from gui_app.core import rundir

    with running_slurm() as cluster:
        for key, value in cluster.env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("REPLICA_STUDIO", " ".join(app_command()))  # the workers run this checkout
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
        config = RunConfig.from_dict({"dataset": {"name": "digits"}, "model": {"name": "mlp"},
                                      "strategy": {"name": "multi_worker_mirrored", "workers": 2},
                                      "training": {"epochs": 6, "global_batch_size": 64, "seed": 3}})
        window.config_panel.set_config(config, checked=True)
        qtbot.waitUntil(window.window_actions.submit_slurm.isEnabled)
        dialog = window.slurm.open()
        dialog.cpus.setValue(1)
        seen: set[str] = set()
        with qtbot.waitSignal(window.supervisor.state_changed, timeout=60_000):
            dialog.start()
        (run_dir,) = [p for p in runs_dir.iterdir() if p.is_dir()]
        job = slurm.read_job(run_dir)
        with qtbot.waitSignal(window.supervisor.run_started, timeout=240_000):
            qtbot.waitUntil(lambda: seen.add(shown_status(window.runs, run_dir)) or "running" in seen, timeout=60_000)
        print(f"the run list showed: {sorted(seen)}")
        qtbot.waitUntil(lambda: window.shown.history.status.step >= 3, timeout=120_000)
        assert window.shown.history.replicas.workers == [0, 1]
        asked = time.monotonic()
        with qtbot.waitSignal(window.supervisor.finished, timeout=120_000) as finished:
            window.window_actions.stop.trigger()
        ended = time.time()
        finish = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()][-1]
        print(f"Stop to the window's end of the run: {time.monotonic() - asked:.1f} s, of which after the run's "
              f"run_finished: {ended - finish['time']:.1f} s")
        assert finished.args[0] == "stopped", finished.args
        assert rundir.has_checkpoint(run_dir)
        stopped_at = rundir.read_run(run_dir).step
        assert cluster.job(job.job_id)["JobState"] == "CANCELLED"
        wait_listed(qtbot, window.runs)
        window.runs.select(run_dir)
        qtbot.waitUntil(window.window_actions.resume_run.isEnabled, timeout=30_000)
        with qtbot.waitSignal(window.supervisor.finished, timeout=600_000) as finished:
            window.window_actions.resume_run.trigger()
        assert finished.args[0] == "completed", finished.args
        resumed = slurm.read_job(run_dir)
        assert resumed.earlier == (job.job_id,) and resumed.job_id != job.job_id
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        steps = Counter(e["step"] for e in events if e["type"] == "step")
        total = next(e for e in events if e["type"] == "run_started")["total_steps"]
        assert sorted(steps) == list(range(1, total + 1)) and set(steps.values()) == {1}
        assert 0 < stopped_at < total
