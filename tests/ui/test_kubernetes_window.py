"""The window and Kubernetes: Run -> Submit to Kubernetes… (off, saying why, without kubectl or
a multi_worker_mirrored config; kubectl's refusal inline), the Job's state in the run list, and a
real 2-worker run through tests/fake_kubectl.py (the manifest's pods as local processes): the
charts follow the chief's events, Stop deletes the Job (stopped with a checkpoint), Resume applies
the kept manifest again and the local copy of the events has every step once."""
from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter

import pytest
from run_dirs import listed_status, wait_listed, write_run
from windows import real_engine, shown_window

from gui_app.core.backends import kubernetes
from gui_app.core.config import RunConfig, StrategyConfig, TrainingConfig
from gui_app.ui.window import kubernetes_actions
from tests.fake_kubectl import FakeKubectl

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="a fake kubectl")
CONFIG = RunConfig(strategy=StrategyConfig(name="multi_worker_mirrored", workers=2),
                   training=TrainingConfig(epochs=1, global_batch_size=64, seed=2))


@pytest.fixture
def fake(tmp_path, monkeypatch):
    fake = FakeKubectl(tmp_path / "kube")
    monkeypatch.setenv("PATH", fake.path())  # the run list asks kubectl in this process; engine processes inherit it
    yield fake
    fake.kill_all()


@pytest.fixture
def window(qtbot, fake_engine):
    """The main window: device detection and the dataset check fake, submit, attach and resume the engine's."""
    with shown_window(qtbot, engine_command=real_engine(fake_engine)) as window:
        yield window


def test_the_menu_entry_says_why_it_is_off(qtbot, window, monkeypatch, tmp_path):
    action = window.window_actions.submit_kubernetes
    monkeypatch.setenv("PATH", str(tmp_path / "no-kubectl"))
    window.config_panel.set_config(CONFIG, checked=True)
    assert not action.isEnabled() and kubernetes_actions.NO_KUBECTL in action.statusTip()
    assert window.kubernetes.open() is None
    fake = FakeKubectl(tmp_path / "kube")
    monkeypatch.setenv("PATH", fake.path())
    window.config_panel.set_config(CONFIG, checked=True)
    qtbot.waitUntil(action.isEnabled)
    assert action.statusTip() == kubernetes_actions.KubernetesActions.tip
    ps = RunConfig.from_dict({**CONFIG.to_dict(), "strategy": {"name": "parameter_server", "workers": 2, "ps": 1}})
    window.config_panel.set_config(ps, checked=True)
    qtbot.waitUntil(lambda: not action.isEnabled())
    assert kubernetes_actions.NOT_MULTI_WORKER in action.toolTip()


def test_the_form_becomes_submits_arguments_and_kubectls_refusal_is_shown_inline(qtbot, window, fake, runs_dir):
    window.config_panel.set_config(CONFIG, checked=True)
    qtbot.waitUntil(window.window_actions.submit_kubernetes.isEnabled)
    dialog = window.kubernetes.open()
    dialog.image.setText("reg.example/rs:2")
    dialog.namespace.setText("ml")
    dialog.gpus.setValue(1)
    dialog.memory.setText("8Gi")
    assert dialog.arguments("c.json") == ["submit", "c.json", "--kubernetes", "--runs-dir", str(runs_dir), "--image",
                                          "reg.example/rs:2", "--namespace", "ml", "--pvc", "replica-studio-runs",
                                          "--memory", "8Gi", "--gpus-per-pod", "1"]
    fake.refuse('error: unable to recognize "job.yaml": Get "https://10.0.0.1:6443/api": connection refused')
    with qtbot.waitSignal(dialog.failed, timeout=30_000) as failed:
        dialog.start()
    refused = 'error: unable to recognize "job.yaml": Get "https://10.0.0.1:6443/api": connection refused'
    assert failed.args[0] == refused
    assert dialog._status.text() == failed.args[0] and dialog.isVisible()  # one line, in the dialog
    dialog.memory.setText("lots")
    with qtbot.waitSignal(dialog.failed, timeout=30_000) as failed:
        dialog.start()
    assert failed.args[0] == "--memory: 'lots' is not a Kubernetes quantity (like 4, 500m, 8Gi)"
    assert not runs_dir.exists() or not any(runs_dir.iterdir())  # no record of a run that was not applied
    dialog.reject()


def _kubernetes_run(runs_dir, name: str, job: str, status: str | None, **kwargs):
    run = write_run(runs_dir, name, status, checkpoint=False, **kwargs)
    (run / kubernetes.MANIFEST_FILE).write_text("---\n{}\n")
    kubernetes.record_job(run, job, "ml")
    return run


def test_the_run_list_shows_the_jobs_state_from_one_kubectl_call(qtbot, runs_dir, tmp_path, monkeypatch):
    from stub_run import StubRun

    from gui_app.ui.window.runs_panel import RunsPanel
    from gui_app.ui.window.window_state import WindowState

    pending = _kubernetes_run(runs_dir, "a-pending", "rs-a", None, steps=0)
    running = _kubernetes_run(runs_dir, "b-running", "rs-b", None, steps=3, started=1.7e9 + 10)
    stopped = _kubernetes_run(runs_dir, "c-stopped", "rs-c", "stopped", steps=5, started=1.7e9 + 20)
    failed = _kubernetes_run(runs_dir, "d-failed", "rs-d", None, steps=4, started=1.7e9 + 30)
    jobs = [{"metadata": {"name": "rs-a"}, "status": {"active": 2, "ready": 0}},
            {"metadata": {"name": "rs-b"}, "status": {"active": 2, "ready": 2}},
            {"metadata": {"name": "rs-d"}, "status": {"failed": 1, "conditions": [
                {"type": "Failed", "status": "True", "reason": "PodFailurePolicy"}]}}]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "jobs.json").write_text(json.dumps({"kind": "List", "items": jobs}))
    (bin_dir / "kubectl").write_text(f'#!/bin/bash\necho "$*" >> {tmp_path}/calls\ncat {tmp_path}/jobs.json\n')
    (bin_dir / "kubectl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    panel = RunsPanel(WindowState(StubRun(), runs_dir))
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: not panel.is_filling())
    assert listed_status(panel, pending) == "pending"
    assert listed_status(panel, running) == "running"
    assert listed_status(panel, stopped) == "stopped"  # the run's own word (its Job is deleted)
    assert listed_status(panel, failed) == "failed"  # no run_finished: the Job's word
    assert (tmp_path / "calls").read_text().splitlines() == [
        "get job rs-a rs-b rs-c rs-d --ignore-not-found -o json -n ml"]
    assert panel.running_runs() == [str(running), str(pending)]
    panel.select(stopped)  # its checkpoints are on the volume: applied again, it continues
    assert panel.resume_button.isEnabled() and not panel.attach_button.isEnabled()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_submit_follow_stop_and_resume_a_two_worker_run_from_the_window(qtbot, window, fake, runs_dir, monkeypatch):
    """The real engine in the fake cluster's pods: the charts get both workers' replicas, Stop
    (kubectl delete job) ends the run "stopped" with a checkpoint on the volume, Resume (the kept
    manifest applied again) completes it, and the local copy of the events has every step once."""
    from gui_app.core import rundir

    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    config = RunConfig.from_dict({"dataset": {"name": "digits"}, "model": {"name": "mlp"},
                                  "strategy": {"name": "multi_worker_mirrored", "workers": 2},
                                  "training": {"epochs": 6, "global_batch_size": 64, "seed": 3, "steps_per_call": 2}})
    window.config_panel.set_config(config, checked=True)
    qtbot.waitUntil(window.window_actions.submit_kubernetes.isEnabled)
    dialog = window.kubernetes.open()
    seen: set[str] = set()
    with qtbot.waitSignal(window.supervisor.state_changed, timeout=60_000):  # idle -> starting: following it
        dialog.start()
    (run_dir,) = [p for p in runs_dir.iterdir() if p.is_dir()]
    record = kubernetes.read_job(run_dir)
    assert fake.calls("apply") == [["apply", "-f", str(run_dir / "job.yaml"), "--context", "fake-cluster"]]
    with qtbot.waitSignal(window.supervisor.run_started, timeout=240_000):
        qtbot.waitUntil(lambda: seen.add(listed_status(window.runs, run_dir) or "") or "running" in seen,
                        timeout=120_000)
    print(f"the run list showed: {sorted(seen)}")
    qtbot.waitUntil(lambda: window.shown.history.status.step >= 4, timeout=120_000)
    assert window.shown.history.replicas.workers == [0, 1]  # both workers' replicas on the charts
    asked = time.monotonic()
    with qtbot.waitSignal(window.supervisor.finished, timeout=120_000) as finished:
        window.window_actions.stop.trigger()
    print(f"Stop to the window's end of the run: {time.monotonic() - asked:.1f} s")
    assert finished.args[0] == "stopped", finished.args
    assert fake.calls("delete")[0][:3] == ["delete", "job", record.job]
    volume = fake.pvc / run_dir.name
    assert rundir.has_checkpoint(volume) and rundir.read_run(volume).status == "stopped"
    stopped_at = rundir.read_run(run_dir).step
    assert stopped_at == rundir.read_run(volume).step
    wait_listed(qtbot, window.runs)
    window.runs.select(run_dir)
    qtbot.waitUntil(window.window_actions.resume_run.isEnabled, timeout=30_000)
    with qtbot.waitSignal(window.supervisor.finished, timeout=600_000) as finished:
        window.window_actions.resume_run.trigger()
    assert finished.args[0] == "completed", finished.args
    assert len(fake.calls("apply")) == 2
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    steps = Counter(e["step"] for e in events if e["type"] == "step")
    total = next(e for e in events if e["type"] == "run_started")["total_steps"]
    assert sorted(steps) == list(range(1, total + 1)) and set(steps.values()) == {1}
    assert 0 < stopped_at < total
    assert [e["status"] for e in events if e["type"] == "run_finished"] == ["stopped", "completed"]
    assert len(kubernetes.read_job(run_dir).pods) == 2  # the chief pod of each apply
    wait_listed(qtbot, window.runs)
    assert listed_status(window.runs, run_dir) == "completed"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_closing_the_window_leaves_the_job_running_and_the_next_window_follows_it_on(qtbot, fake, runs_dir,
                                                                                    fake_engine, monkeypatch):
    """The window lets go of the run when it closes (the Job is not deleted); the next one finds
    it running from the Job's state, attaches at launch, and its copy of the chief's events goes
    on from where the first window's ended: every step once."""
    engine = real_engine(fake_engine)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    config = RunConfig.from_dict({"dataset": {"name": "digits"}, "model": {"name": "mlp"},
                                  "strategy": {"name": "multi_worker_mirrored", "workers": 2},
                                  "training": {"epochs": 5, "global_batch_size": 64, "seed": 3, "steps_per_call": 2}})
    with shown_window(qtbot, engine_command=engine) as first:
        first.config_panel.set_config(config, checked=True)
        qtbot.waitUntil(first.window_actions.submit_kubernetes.isEnabled)
        with qtbot.waitSignal(first.supervisor.run_started, timeout=240_000):
            first.kubernetes.open().start()
        qtbot.waitUntil(lambda: first.shown.history.status.step >= 2, timeout=120_000)
    (run_dir,) = [p for p in runs_dir.iterdir() if p.is_dir()]
    copied = (run_dir / "events.jsonl").read_text().count("\n")
    assert fake.calls("delete") == [] and kubernetes.job_active(run_dir)  # the Job runs on
    with shown_window(qtbot, engine_command=engine) as second:
        with qtbot.waitSignal(second.supervisor.finished, timeout=600_000) as finished:
            pass  # it attaches to the running run at launch, once its run list is read
        assert finished.args[0] == "completed", finished.args
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        total = next(e for e in events if e["type"] == "run_started")["total_steps"]
        assert second.shown.history.status.step == total
    steps = Counter(e["step"] for e in events if e["type"] == "step")
    assert sorted(steps) == list(range(1, total + 1)) and set(steps.values()) == {1}
    assert len(events) > copied and len(kubernetes.read_job(run_dir).pods) == 1  # one chief, followed twice
