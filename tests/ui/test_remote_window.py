"""The window on a real SSH host (tests/ssh_host.py: sshd in a network namespace, the app there):
Tools -> Hosts… tests the connection, Run on trains there, a dropped connection (the attach's ssh
client killed mid-run) is said and made again with every step once, and the run list shows the
host's runs. Each engine process costs seconds of TensorFlow start-up there: slow."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from ssh_host import ALIAS

from gui_app.core.config import RunConfig, StrategyConfig, TrainingConfig
from gui_app.core.events import Step
from gui_app.core.hosts import Host, add_host
from gui_app.core.rundir import read_run
from gui_app.ui.settings import Settings
from gui_app.ui.window.main_window import MainWindow
from gui_app.ui.workers.attachment import CONNECTION_LOST

pytestmark = pytest.mark.slow

CONFIG = RunConfig(strategy=StrategyConfig(name="one_device"),
                   training=TrainingConfig(epochs=6, global_batch_size=64, steps_per_call=1, seed=1))
ENGINE_TIMEOUT_S = 240  # two cores shared with other work: a ceiling


@pytest.fixture
def on_host(ssh_host, monkeypatch, tmp_path) -> Host:
    """The window's process reaches the test host (its ssh config and shared connections), and
    hosts.json names it with a runs folder of this test's own there."""
    for key in ("REPLICA_STUDIO_SSH_CONFIG", "XDG_RUNTIME_DIR"):
        monkeypatch.setenv(key, ssh_host.env(tmp_path)[key])
    host = Host(ALIAS, command=ssh_host.command, runs_dir=f"~/window-{tmp_path.name}")
    add_host(host)
    return host


def _ssh_attach_clients() -> list[int]:
    """This process's ssh children that run attach (the window's attachment to the run there)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            args = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and Path(args[0].decode()).name == "ssh" and any(b" attach " in a for a in args):
            found.append(int(stat.parent.name))
    return found


def test_hosts_dialog_tests_the_connection(qtbot, on_host):
    window = MainWindow()
    qtbot.addWidget(window)
    dialog = window.open_hosts()
    assert dialog.list.currentItem().text() == ALIAS
    dialog.test()
    qtbot.waitUntil(lambda: not dialog.is_testing(), timeout=ENGINE_TIMEOUT_S * 1000)
    assert dialog.result.text().startswith("Connected: replica-studio "), dialog.result.text()
    dialog.new_button.click()
    dialog.name.setText("rs-no-such-alias.invalid")
    assert dialog.save()
    dialog.test()
    qtbot.waitUntil(lambda: not dialog.is_testing(), timeout=120_000)
    assert dialog.result.text().startswith("rs-no-such-alias.invalid: unknown host (ssh: Could not resolve"), \
        dialog.result.text()
    dialog.reject()
    window.close()


def test_train_there_survives_a_dropped_connection(qtbot, on_host, ssh_host, tmp_path):
    window = MainWindow(settings=Settings(run_on=ALIAS))
    qtbot.addWidget(window)
    window.config_panel.set_config(CONFIG, checked=True)
    notices: list[str] = []
    window.supervisor.notice.connect(notices.append)
    try:
        steps = lambda batch: any(isinstance(e, Step) and e.step >= 5 for e in batch)  # noqa: E731
        with qtbot.waitSignal(window.supervisor.events, check_params_cb=steps, timeout=ENGINE_TIMEOUT_S * 1000):
            window.actions.train.trigger()
        run_dir = window.state.active_run
        assert Path(run_dir).parent == ssh_host.home / f"window-{tmp_path.name}"  # the host's runs folder
        (client,) = _ssh_attach_clients()
        lost = CONNECTION_LOST.format(host=ALIAS)
        with qtbot.waitSignal(window.supervisor.notice, check_params_cb=lambda text: text == lost, timeout=30_000):
            os.kill(client, signal.SIGKILL)
        qtbot.waitUntil(lambda: window.state_label.text() == lost, timeout=5_000)
        with qtbot.waitSignal(window.supervisor.finished, timeout=ENGINE_TIMEOUT_S * 1000) as finished:
            pass
        assert finished.args[:2] == ["completed", run_dir], finished.args
        assert notices[-1] == ""  # attached again
        total = read_run(run_dir).step
        shown = [int(s) for s in window.shown.history.training.steps.column(0)]
        assert total > 5 and shown == list(range(1, total + 1))  # every step once
    finally:
        window.settings.confirm_close_during_run = False
        window.close()
