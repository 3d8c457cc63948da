"""The tabs of a run on a real SSH host (tests/ssh_host.py: sshd in a network namespace, the app
there): its Log tab follows the run's engine.log there, Resume continues it there after a Stop,
its Evaluation tab shows the misclassified images copied back, the Try tab classifies images sent
from here with the model there (and survives its connection's loss); a MultiWorkerMirrored
cluster over both test hosts starts from one Train. Each engine process costs seconds of
TensorFlow start-up there: slow."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from pngs import digit_like_pngs
from ssh_host import ALIAS, ALIAS2, CLIENT_IP, USER

from gui_app.core.cluster_addresses import SshWorker, free_ports
from gui_app.core.config import DatasetConfig, ModelConfig, RunConfig, StrategyConfig, TrainingConfig
from gui_app.core.events import Step
from gui_app.core.rundir import MISCLASSIFIED_FILE, read_run
from gui_app.core.ssh_hosts import Host, add_host, split_run_key
from gui_app.ui.settings import Settings
from gui_app.ui.window.main_window import MainWindow
from gui_app.ui.window.window_state import TRY

pytestmark = pytest.mark.slow

# A low learning rate: the test set keeps some mistakes for the gallery.
CONFIG = RunConfig(strategy=StrategyConfig(name="one_device"),
                   training=TrainingConfig(epochs=8, global_batch_size=64, steps_per_call=1, seed=1,
                                           learning_rate=0.0003))
ENGINE_TIMEOUT_S = 240  # two cores shared with other work: a ceiling
LOG_LINE = "rs-test: a line of engine.log there"


def _steps_shown(window) -> list[int]:
    return [int(s) for s in window.shown.history.training.steps.column(0)]


def _predict_processes(user: str = USER) -> list[int]:
    out = subprocess.run(["ps", "-u", user, "-o", "pid=,args="], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if "-m gui_app predict" in line]


def test_log_resume_evaluation_and_try_of_a_run_there(qtbot, on_host, tmp_path):
    window = MainWindow(settings=Settings(run_on=ALIAS))
    qtbot.addWidget(window)
    window.config_panel.set_config(CONFIG, checked=True)
    try:
        steps = lambda batch: any(isinstance(e, Step) and e.step >= 3 for e in batch)  # noqa: E731
        with qtbot.waitSignal(window.supervisor.events, check_params_cb=steps, timeout=ENGINE_TIMEOUT_S * 1000):
            window.window_actions.train.trigger()
        key = window.state.active_run
        run_dir = Path(split_run_key(key)[1])
        # The Log tab: the run's own log there, not only what attach and ssh say here.
        with (run_dir / "engine.log").open("a") as log:
            log.write(LOG_LINE + "\n")
        qtbot.waitUntil(lambda: LOG_LINE in window.log_tab.view.toPlainText(), timeout=30_000)
        with qtbot.waitSignal(window.supervisor.finished, timeout=ENGINE_TIMEOUT_S * 1000) as stopped:
            window.supervisor.stop()
        assert stopped.args[:2] == ["stopped", key], stopped.args
        stopped_at = read_run(run_dir).step
        assert 3 <= stopped_at < read_run(run_dir).total_steps

        # Resume from the run list: resume --host … --detach, followed from its first event.
        window.runs.refresh()
        qtbot.waitUntil(lambda: window.runs.select(key) or window.runs.resume_button.isEnabled(), timeout=60_000)
        with qtbot.waitSignal(window.supervisor.finished, timeout=ENGINE_TIMEOUT_S * 1000) as finished:
            window.runs.resume_button.click()
        assert finished.args[:2] == ["completed", key], finished.args
        total = read_run(run_dir).step
        assert total == read_run(run_dir).total_steps > stopped_at
        assert _steps_shown(window) == list(range(1, total + 1))  # the history from there, then the resumed steps
        assert window.log_tab.view.toPlainText().count(LOG_LINE) == 1  # followed again from where it was

        # The Evaluation tab: the gallery's images copied back from there.
        tab = window.evaluation_tab
        with np.load(run_dir / MISCLASSIFIED_FILE) as there:
            wrong = len(there["y_true"])
        assert wrong > 0  # the low learning rate leaves mistakes to show
        qtbot.waitUntil(lambda: tab.gallery.count() == wrong, timeout=60_000)
        assert "copying" not in tab._gallery_title.text() and f"({wrong})" in tab._gallery_title.text()

        # The Try tab: the model stays there, the images go over the connection.
        assert window.state.model_run() == key
        paths, _ = digit_like_pngs(tmp_path, count=2)
        try_tab = window.try_tab
        with qtbot.waitSignal(try_tab.model_loaded, timeout=ENGINE_TIMEOUT_S * 1000):
            window.state.set_tab(TRY)
        with qtbot.waitSignal(try_tab.predictions_ready, timeout=60_000) as ready:
            try_tab.add_image_files(paths)
        assert [p.source for p in ready.args[0]] == [str(p) for p in paths]
        # Its process there killed: one line in the tab, and the next images load it again.
        (process,) = _predict_processes()
        with qtbot.waitSignal(try_tab.failed, timeout=60_000) as failed:
            os.kill(process, signal.SIGKILL)
        assert failed.args[0].endswith("the model loads there again with the next images"), failed.args
        with qtbot.waitSignal(try_tab.predictions_ready, timeout=ENGINE_TIMEOUT_S * 1000) as again:
            try_tab.add_image_files(paths[:1])
        assert [p.source for p in again.args[0]] == [str(paths[0])]
    finally:
        window.close()


def test_a_cluster_over_two_ssh_hosts_starts_from_one_train(qtbot, ssh_host, second_ssh_host, monkeypatch, tmp_path):
    """The chief here, a worker on each test host (started over ssh by the cluster's launcher):
    one Train, both workers' replicas on the charts, the run completes."""
    for key in ("REPLICA_STUDIO_SSH_CONFIG", "XDG_RUNTIME_DIR"):
        monkeypatch.setenv(key, ssh_host.env(tmp_path)[key])
    for alias in (ALIAS, ALIAS2):
        add_host(Host(alias, command=ssh_host.command))
    chief = f"{CLIENT_IP}:{free_ports(1, CLIENT_IP)[0]}"  # this machine, as the hosts reach it
    config = RunConfig(dataset=DatasetConfig(name="digits"), model=ModelConfig(name="mlp"),
                       strategy=StrategyConfig(name="multi_worker_mirrored", join_timeout_s=60,
                                               cluster=(chief, SshWorker(ALIAS, 23456), SshWorker(ALIAS2, 23456))),
                       training=TrainingConfig(epochs=1, global_batch_size=96, seed=4, steps_per_call=5))
    window = MainWindow(runs_dir=tmp_path / "runs")
    qtbot.addWidget(window)
    window.config_panel.set_config(config, checked=True)
    try:
        with qtbot.waitSignal(window.supervisor.finished, timeout=ENGINE_TIMEOUT_S * 1000) as finished:
            window.window_actions.train.trigger()
        assert finished.args[0] == "completed", finished.args
        history = window.shown.history
        assert history.started.num_workers == 3
        tasks = [r.device.split("/device:")[0] for r in history.started.replicas]
        assert tasks == [f"/job:worker/replica:0/task:{i}" for i in range(3)]
        total = read_run(finished.args[1]).step
        assert _steps_shown(window) == list(range(1, total + 1))
    finally:
        window.close()
