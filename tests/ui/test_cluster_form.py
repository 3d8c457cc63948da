"""The cluster part of the strategy form, and the Replicas tab's worker labels."""
from __future__ import annotations

from PySide6.QtWidgets import QApplication

from form_errors import shown_errors

from gui_app.core import events as ev
from gui_app.core.cluster_addresses import SshWorker
from gui_app.core.config import StrategyConfig
from gui_app.ui.tabs.replicas import ReplicasTab


def _use(panel, name):
    form = panel.strategy
    form.name.setCurrentIndex(form.name.findData(name))
    return form


def test_local_multi_worker_round_trip_and_summary(panel):
    form = _use(panel, "multi_worker_mirrored")
    form.cluster.workers.setValue(3)
    form.cluster.max_restarts.setValue(2)
    strategy = panel.config().strategy
    assert (strategy.name, strategy.workers, strategy.cluster, strategy.max_restarts) == (
        "multi_worker_mirrored", 3, None, 2)
    # Every worker runs runtime.cpu_devices replicas (2 here): the run has 3 x 2.
    assert form.summary.text() == "6 replicas (3 workers × 2) · global batch 64: 4 replicas get 11 examples, 2 get 10"
    panel.training.global_batch_size.setValue(60)
    assert form.summary.text() == "6 replicas (3 workers × 2) · global batch 60 · 10 per replica"
    assert "127.0.0.1" in form.cluster.warning.text()
    config = panel.config().replace(strategy=StrategyConfig(name="parameter_server", workers=2, ps=2))
    panel.set_config(config)
    assert panel.config().strategy == config.strategy
    assert form.cluster.ps.isVisibleTo(form)
    # Each step trains one worker on the whole global batch: no replicas to split it over.
    assert form.summary.text() == "2 workers, asynchronous · each step: one worker trains on the global batch of 60"
    assert not form.balance_warning.isVisibleTo(form)


def test_host_list_shows_a_command_per_other_host_with_copy(panel):
    form = _use(panel, "multi_worker_mirrored")
    cluster = form.cluster
    cluster.place.setCurrentIndex(cluster.place.findData("hosts"))
    cluster.hosts.setPlainText("192.168.1.10:2222\n192.168.1.11:2222\n192.168.1.12:2222")
    assert panel.config().strategy.cluster == ("192.168.1.10:2222", "192.168.1.11:2222", "192.168.1.12:2222")
    assert len(cluster.copy_buttons) == 2
    cluster.copy_buttons[1].click()
    assert QApplication.clipboard().text() == "replica-studio worker run.json --index 2"
    assert "no authentication" in cluster.warning.text()
    cluster.hosts.setPlainText("192.168.1.10:2222\n8.8.8.8:2222")
    assert panel.config() is None
    assert any("not a loopback or private address" in m for m in shown_errors(panel).values())
    cluster.allow_public.setChecked(True)
    assert panel.config().strategy.allow_public_hosts
    assert QApplication.clipboard() and cluster.worker_command(1).endswith("--allow-public-hosts")


def test_ssh_host_lines_are_workers_the_run_starts_over_ssh(panel):
    form = _use(panel, "multi_worker_mirrored")
    cluster = form.cluster
    cluster.place.setCurrentIndex(cluster.place.findData("hosts"))
    cluster.hosts.setPlainText("192.168.1.10:2222\nssh me@gpu2:2222\nssh gpu3:2223")
    config = panel.config()
    assert config.strategy.cluster == ("192.168.1.10:2222", SshWorker("me@gpu2", 2222), SshWorker("gpu3", 2223))
    assert cluster.copy_buttons == []  # nothing to start by hand
    assert cluster.max_restarts.isVisibleTo(form)  # the run starts every worker: it can restart them
    panel.set_config(config)
    assert cluster.hosts.toPlainText() == "192.168.1.10:2222\nssh me@gpu2:2222\nssh gpu3:2223"
    cluster.hosts.setPlainText("192.168.1.10:2222\nssh gpu2")
    assert panel.config() is None
    assert any("entry 1: port: the TensorFlow gRPC port there" in m for m in shown_errors(panel).values())


def test_replica_tab_labels_replicas_worker_slash_device(qtbot):
    charts = ReplicasTab()
    qtbot.addWidget(charts)
    devices = [(0, "/job:worker/replica:0/task:0/device:CPU:0"), (1, "/job:worker/replica:0/task:1/device:CPU:0")]
    charts.history.add([ev.RunStarted(run_dir="", config={}, num_replicas=2, replicas=[
        ev.ReplicaInfo(replica=i, worker=w, device=d) for i, (w, d) in enumerate(devices)])])
    charts.history.add([ev.Step(step=s, replicas=[
        ev.ReplicaStats(replica=i, worker=w, device=d, loss=1.0 / s, grad_norm=1.0, examples_per_sec=100.0 * (i + 1))
        for i, (w, d) in enumerate(devices)]) for s in (1, 2, 3)])
    charts.flush()
    assert charts.history.replicas.label(1) == "1/CPU:0"
    assert charts.group_by_worker.isVisibleTo(charts)
    assert "replica 0</b> (0/CPU:0)" in charts.slowest_label.text()
    charts.group_by_worker.setChecked(True)
    charts.flush()
    assert len(charts.loss_plot.listDataItems()) == 2


def test_parameter_server_steps_keep_each_workers_last_value(qtbot):
    charts = ReplicasTab()
    qtbot.addWidget(charts)
    charts.history.add([ev.RunStarted(run_dir="", config={}, num_replicas=1, replicas=[
        ev.ReplicaInfo(replica=w, worker=w, device=f"/job:worker/replica:0/task:{w}/device:CPU:0") for w in (0, 1)])])
    charts.history.add([ev.Step(step=s, per_worker=True, replicas=[
        ev.ReplicaStats(replica=s % 2, worker=s % 2, loss=float(s), grad_norm=1.0)]) for s in (1, 2, 3)])
    loss = charts.history.replicas.metrics["loss"].data
    assert loss[-1].tolist() == [2.0, 3.0]  # worker 0 last ran step 2, worker 1 step 3
