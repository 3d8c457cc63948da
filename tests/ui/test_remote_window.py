"""The window on a real SSH host (tests/ssh_host.py: sshd in a network namespace, the app there):
Tools -> Hosts… tests the connection, Run on trains there, a dropped connection (the attach's ssh
client killed mid-run) is said and made again with every step once, and the run list shows the
host's runs. Each engine process costs seconds of TensorFlow start-up there: slow."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from PySide6.QtCore import Qt

import pytest
from ssh_host import ALIAS, HOST_IP, ssh_clients

from gui_app.core.config import RunConfig, StrategyConfig, TrainingConfig
from gui_app.core.events import Step
from gui_app.core.rundir import read_run
from gui_app.core.ssh_hosts import Host, add_host, split_run_key
from gui_app.ui.settings import Settings
from gui_app.ui.window.main_window import MainWindow
from gui_app.ui.window.run_rows import HOST, PATH_ROLE
from gui_app.ui.workers.attachment import CONNECTION_LOST

pytestmark = pytest.mark.slow

CONFIG = RunConfig(strategy=StrategyConfig(name="one_device"),
                   training=TrainingConfig(epochs=12, global_batch_size=64, steps_per_call=1, seed=1))
ENGINE_TIMEOUT_S = 240  # two cores shared with other work: a ceiling


def test_hosts_dialog_tests_the_connection(qtbot, on_host):
    window = MainWindow()
    qtbot.addWidget(window)
    dialog = window.open_hosts()
    assert dialog.list.currentItem().text() == ALIAS
    dialog.test()
    qtbot.waitUntil(lambda: not dialog.is_testing(), timeout=ENGINE_TIMEOUT_S * 1000)
    assert dialog.result_label.text().startswith("Connected: replica-studio "), dialog.result_label.text()
    dialog.new_button.click()
    dialog.name.setText("rs-no-such-alias.invalid")
    assert dialog.save()
    dialog.test()
    qtbot.waitUntil(lambda: not dialog.is_testing(), timeout=120_000)
    assert dialog.result_label.text().startswith("rs-no-such-alias.invalid: unknown host (ssh: Could not resolve"), \
        dialog.result_label.text()
    dialog.reject()
    window.close()


def test_hosts_dialog_refuses_an_alias_whose_key_changed_after_one_of_the_same_address_connected(
        qtbot, on_host, ssh_host, tmp_path):
    """Test connection of the working alias, then of another alias of the same address whose
    known_hosts holds another key: refused, though the first alias's connection is open; and
    Reconnect of the working one connects anew."""
    other = tmp_path / "other-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True, timeout=30)
    known = tmp_path / "known_hosts"
    known.write_text(f"{HOST_IP} {' '.join(other.with_suffix('.pub').read_text().split()[:2])}\n")
    changed = ssh_host.alias("rs-window-changed-key", UserKnownHostsFile=str(known))
    add_host(Host(changed, command=ssh_host.command))
    window = MainWindow()
    qtbot.addWidget(window)
    dialog = window.open_hosts()
    results = []
    for name, button in ((ALIAS, dialog.test_button), (changed, dialog.test_button), (ALIAS, dialog.reconnect_button)):
        dialog.list.setCurrentItem(dialog.list.findItems(name, Qt.MatchFlag.MatchExactly)[0])
        button.click()
        qtbot.waitUntil(lambda: not dialog.is_testing(), timeout=ENGINE_TIMEOUT_S * 1000)
        results.append(dialog.result_label.text())
    assert results[0].startswith("Connected: replica-studio "), results[0]
    assert results[1].startswith(f"{changed}: the host key changed since it was recorded ({known}:1)"), results[1]
    assert results[2].startswith("Connected: replica-studio "), results[2]
    dialog.reject()
    window.close()


def _steps_shown(window) -> list[int]:
    return [int(s) for s in window.shown.history.training.steps.column(0)]


def _row(window, key: str) -> tuple[str, str] | None:
    """(status, host) of the run list's row of ``key``, as shown."""
    tree = window.runs.tree
    for i in range(tree.topLevelItemCount()):
        item = tree.topLevelItem(i)
        if item.data(0, PATH_ROLE) == key:
            return item.text(0).split(" (")[0], item.text(HOST)
    return None


def test_train_there_survives_a_dropped_connection_and_the_window_going_away(qtbot, on_host, ssh_host, tmp_path):
    """Run on the host, Train; the attach's ssh client killed mid-run: "connection to HOST lost,
    reconnecting…", attached again; the window closed (the run goes on), a new one follows it at
    launch from its first event; the run completes with every step once on its charts, the run
    list shows it with the host, Open replays it from there, and Export copies its model back."""
    window = MainWindow(settings=Settings(run_on=ALIAS))
    qtbot.addWidget(window)
    window.config_panel.set_config(CONFIG, checked=True)
    notices: list[str] = []
    window.supervisor.notice.connect(notices.append)
    try:
        steps = lambda batch: any(isinstance(e, Step) and e.step >= 5 for e in batch)  # noqa: E731
        with qtbot.waitSignal(window.supervisor.events, check_params_cb=steps, timeout=ENGINE_TIMEOUT_S * 1000):
            window.window_actions.train.trigger()
        key = window.state.active_run
        host_name, run_dir = split_run_key(key)
        assert host_name == ALIAS and Path(run_dir).parent == ssh_host.home / f"window-{tmp_path.name}"
        (client,) = ssh_clients(" attach ")
        lost = CONNECTION_LOST.format(host=ALIAS)
        with qtbot.waitSignal(window.supervisor.notice, check_params_cb=lambda text: text == lost, timeout=30_000):
            os.kill(client, signal.SIGKILL)
        assert window.state_label.text() == lost
        qtbot.waitUntil(lambda: notices[-1] == "", timeout=30_000)  # attached again
        shown = _steps_shown(window)
        assert shown == list(range(1, shown[-1] + 1))  # none lost, none twice across the drop
    finally:
        window.settings.confirm_close_during_run = False  # Keep training in the background
        window.close()
    assert read_run(run_dir).status == "interrupted"  # no run_finished yet: it runs on there
    again = MainWindow(settings=Settings(run_on=ALIAS))
    qtbot.addWidget(again)
    try:
        qtbot.waitUntil(lambda: again.state.active_run == key, timeout=60_000)  # followed at launch
        with qtbot.waitSignal(again.supervisor.finished, timeout=ENGINE_TIMEOUT_S * 1000) as finished:
            pass
        assert finished.args[:2] == ["completed", key], finished.args
        total = read_run(run_dir).step
        assert total == read_run(run_dir).total_steps
        assert _steps_shown(again) == list(range(1, total + 1))  # from its first event, every step once
        qtbot.waitUntil(lambda: _row(again, key) == ("completed", ALIAS), timeout=60_000)
        again.shown.clear()
        again.open_run(key)
        qtbot.waitUntil(lambda: not again.remote_open.is_reading(), timeout=60_000)
        assert again.state.shown_run == key and _steps_shown(again) == list(range(1, total + 1))
        again.runs.select(key)
        assert again.runs.export_button.isEnabled() and not again.runs.resume_button.isEnabled()
        dialog = again.models.export_model("keras", key)  # written there, copied back here
        dialog._output.setText(str(tmp_path / "exported" / "model.keras"))
        with qtbot.waitSignal(dialog.succeeded, timeout=ENGINE_TIMEOUT_S * 1000) as exported:
            dialog.start()
        assert exported.args[0].written and (tmp_path / "exported" / "model.keras").is_file()
        dialog.reject()
    finally:
        again.close()
