"""The run's diagnosis in the window: the banner over the tabs says ``diagnose``'s own sentence,
its Details… view every figure, the non-finite replica is named on the Replicas tab and the step
marked on the charts; a live run that goes silent shows the stall banner until steps come again;
the desktop is told while the window is not the active one."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from run_dirs import write_run
from windows import train

from gui_app.core import diagnosis
from gui_app.core import events as ev
from gui_app.core.history.findings import RunFindings
from gui_app.ui.window.stall_watch import StallWatch


@pytest.fixture
def told(window, monkeypatch):
    """The desktop notifications sent, (summary, body, urgent), with the window not the active one."""
    sent: list[tuple[str, str, bool]] = []
    monkeypatch.setattr(window, "isActiveWindow", lambda: False)
    monkeypatch.setattr(window.notifications.notifier, "notify",
                        lambda summary, body, urgent=False: sent.append((summary, body, urgent)) or True)
    return sent


def _banner_says(window) -> str:
    banner = window.banner
    return banner.sentence() if not banner.isHidden() else ""


def _check_non_finite_shown(window, run_dir: str | Path, step: int, replica: int, kept: str) -> None:
    (expected,) = diagnosis.diagnose(run_dir).findings  # what `replica-studio diagnose` says
    assert _banner_says(window) == expected.message
    assert expected.message in window.banner.label.text().replace("&#x27;", "'")
    assert f"replica {replica} went non-finite first, at step {step}" in expected.message
    details = window.banner.show_details().text.toPlainText()
    window.banner.details_dialog.close()
    for figure in (f"Step\n{step}\n", f"Replica\n{replica}\n", "Went first\nloss\n", f"Checkpoint kept\n{kept}",
                   "First non-finite layer (replayed)\nlogits (activations)", "Examples non-finite alone\n17",
                   expected.message):
        assert figure in details
    replicas = window.replicas_tab
    replicas.flush()
    assert replicas.non_finite_replica() == replica and not replicas.non_finite_label.isHidden()
    assert f"replica {replica}</b>" in replicas.non_finite_label.text()
    widths = [curve.opts["pen"].width() for curve in replicas._loss_curves]
    assert widths[replica] == 3 and all(w == 1 for r, w in enumerate(widths) if r != replica)
    loss_plot, line = window.training_tab.loss_plot, window.training_tab.non_finite_lines[0]
    assert line in loss_plot.items and line.isVisible() and line.value() == step


def test_a_diverging_run_shows_its_finding_and_tells_the_desktop(qtbot, window, fake_engine, told):
    fake_engine.configure("diverge", steps=20)
    status, run_dir, _message = train(qtbot, window)
    assert status == "failed"
    # Its epochs are 4 steps: the checkpoint of step 4 is the last good one, kept.
    _check_non_finite_shown(window, run_dir, step=7, replica=1, kept=f"{run_dir}/checkpoints/ckpt-4")
    (expected,) = diagnosis.diagnose(run_dir).findings
    assert "grew 10^5x over 5 steps" in expected.message  # replica 1's norm: 10 at step 1 to 1e6 at step 6
    assert told == [("Training diverged", f"{Path(run_dir).name}: {expected.message}", True)]  # not a second one
    window.banner.dismiss()
    assert window.banner.isHidden()
    other = write_run(Path(window.state.runs_dir), "other", "completed")
    window.open_run(str(other))  # another run on screen: no finding, nothing marked
    assert window.banner.isHidden() and not window.training_tab.non_finite_lines[0].isVisible()
    assert window.replicas_tab.non_finite_replica() is None and window.replicas_tab.non_finite_label.isHidden()
    window.open_run(run_dir)  # the diverged run again: its banner again (the dismissal went with it)
    assert _banner_says(window) == expected.message


def test_opening_a_diverged_run_shows_the_same_banner(qtbot, window, runs_dir, told):
    run = write_run(runs_dir, "diverged", None, steps=6)
    checkpoint = run / "checkpoints" / "ckpt-4"
    checkpoint.with_name("ckpt-4.index").write_bytes(b"")
    message = "the loss became NaN or infinite at step 7; try a lower training.learning_rate"
    tail = [ev.NonFinite(time=1.7e9 + 7, step=7, first="loss", replica=1, replicas=[1], checkpoint=str(checkpoint)),
            ev.Error(time=1.7e9 + 7, message=message, kind="training"),
            ev.RunFinished(time=1.7e9 + 8, status="failed", run_dir=str(run), step=6, message=message)]
    with (run / "events.jsonl").open("a") as f:
        f.writelines(json.dumps(ev.encode(e)) + "\n" for e in tail)
    window.open_run(str(run))
    (expected,) = diagnosis.diagnose(run).findings
    assert _banner_says(window) == expected.message and str(checkpoint) in expected.message
    assert window.replicas_tab.non_finite_replica() == 1
    assert window.training_tab.non_finite_lines[0].value() == 7
    details = window.banner.show_details().text.toPlainText()
    assert f"Checkpoint kept\n{checkpoint}" in details and message in details  # and the run's error
    assert told == []  # an opened run is no news


def test_a_live_run_that_goes_silent_shows_a_stall_until_steps_come_again(qtbot, window, fake_engine, told,
                                                                          monkeypatch, tmp_path):
    monkeypatch.setattr(RunFindings, "stall_floor", 0.5)  # diagnose waits 5 s at least
    monkeypatch.setattr(StallWatch, "interval_ms", 50)
    release = tmp_path / "release"  # the engine stays silent after step 3 until the test writes here
    os.mkfifo(release)
    monkeypatch.setenv("FAKE_ENGINE_STALL_UNTIL", str(release))
    fake_engine.configure("stall", steps=20)
    assert not window.stall_watch.is_watching()
    # On a loaded machine a pause between the first steps can pass the lowered floor: the
    # stall meant here is the one after step 3.
    with qtbot.waitSignal(window.stall_watch.stalled, timeout=30_000,
                          check_params_cb=lambda run_dir, sentence: " since step 3 " in sentence) as stalled:
        window.window_actions.train.trigger()
    run_dir, sentence = stalled.args
    assert window.stall_watch.is_watching()
    assert re.match(r"no step has finished for \d+ s since step 3 ", sentence), sentence
    pid = json.loads((Path(run_dir) / "process.json").read_text())["pid"]
    assert f"process {pid} is sleeping" in sentence  # the fake engine sleeps: its state from /proc
    assert _banner_says(window).startswith("no step has finished for")
    stall = window.shown.history.findings.stall
    assert stall is not None and stall.since_step == 3 and stall.pid == pid
    assert told[-1] == ("Training stalled", f"{Path(run_dir).name}: {sentence}", True)
    assert {title for title, *_ in told} == {"Training stalled"}
    stalls = len(told)
    release.write_text("go")  # opens the FIFO for writing: the engine's read returns
    qtbot.waitUntil(lambda: window.shown.history.findings.stall is None, timeout=10_000)  # step 4 came
    assert window.banner.isHidden()
    with qtbot.waitSignal(window.supervisor.finished, timeout=30_000) as finished:
        pass
    assert finished.args[0] == "completed" and not window.stall_watch.is_watching()
    assert window.banner.isHidden() and len(told) == stalls + 1  # the stall, then the run's end


def _cluster_run(runs_dir: Path, stalled: bool) -> Path:
    """A 2-worker run whose worker 1 arrives at the all-reduce 30 ms late in every step, then (when
    ``stalled``) is frozen: the launcher's stall event, and TensorFlow's heartbeat ends the run."""
    run = write_run(runs_dir, "cluster", None, steps=0)
    started = 1.7e9
    devices = [f"/job:worker/replica:0/task:{w}/device:CPU:0" for w in range(2)]
    lines = [ev.RunStarted(time=started, run_dir=str(run), config={}, total_steps=100, steps_per_epoch=50, epochs=2,
                           num_replicas=2, num_workers=2,
                           replicas=[ev.ReplicaInfo(replica=w, worker=w, device=d) for w, d in enumerate(devices)])]
    for step in range(1, 41):
        lines.append(ev.Step(time=started + step * 0.1, step=step, epoch=1, loss=1.0, step_time=0.1, replicas=[
            ev.ReplicaStats(replica=w, worker=w, device=d, loss=1.0, examples=32, grad_norm=1.0,
                            step_time=0.03 + 0.03 * w, ready_time=0.035 + 0.03 * w) for w, d in enumerate(devices)]))
    if stalled:
        message = "worker 1 stopped sending heartbeats (hung or unreachable) at step 40"
        lines += [ev.Stall(time=started + 7, worker=1, reason="its process is stopped (T (stopped))", since_step=40,
                           seconds=2.6, expected_seconds=0.1, workers=[
                               ev.WorkerStatus(worker=0, phase="training", last_step=40, phase_seconds=2.5, pid=11,
                                               stack=["controller.py:95 train", "loop.py:191 train"]),
                               ev.WorkerStatus(worker=1, state="stopped", os_state="T (stopped)", phase="training",
                                               last_step=40, pid=12)]),
                  ev.Error(time=started + 15, message=message, kind="cluster"),
                  ev.RunFinished(time=started + 15, status="failed", run_dir=str(run), step=40, message=message)]
    (run / "events.jsonl").write_text("".join(json.dumps(ev.encode(e)) + "\n" for e in lines))
    return run


def test_a_cluster_stall_names_its_worker_with_every_workers_phase_and_stack(qtbot, window, runs_dir, told):
    run = _cluster_run(runs_dir, stalled=True)
    window.open_run(str(run))
    expected = diagnosis.diagnose(run).findings
    assert [f.kind for f in expected] == ["stall", "straggler"]
    assert _banner_says(window) == expected[0].message and "worker 1 holds the others up" in expected[0].message
    assert "kill -CONT 12" in expected[0].message
    details = window.banner.show_details().text.toPlainText()
    window.banner.details_dialog.close()
    for figure in ("Holding the others up\nworker 1", "Worker 1 (holds the others up)", "stopped, T (stopped) in /proc",
                   "training for 2 s, last step 40", "loop.py:191 train", expected[1].message):
        assert figure in details, figure
    replicas = window.replicas_tab
    replicas.flush()
    assert replicas.named_worker() == 1 and "Worker 1</b> holds the others up" in replicas.worker_label.text()
    widths = [curve.opts["pen"].width() for curve in replicas._loss_curves]
    assert widths == [1, 3]
    assert told == []  # an opened run is no news


def test_a_straggler_is_named_on_the_banner_and_the_replicas_tab(qtbot, window, runs_dir):
    run = _cluster_run(runs_dir, stalled=False)
    window.open_run(str(run))
    (expected,) = diagnosis.diagnose(run).findings
    assert expected.kind == "straggler" and expected.worker == 1 and expected.cause == "compute"
    assert _banner_says(window) == expected.message
    assert "Straggler:" in window.banner.label.text()
    replicas = window.replicas_tab
    replicas.flush()
    assert replicas.named_worker() == 1 and "the straggler" in replicas.worker_label.text()
