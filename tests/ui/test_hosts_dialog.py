"""Tools -> Hosts… and the toolbar's Run on list, without a connection: the entries go to the
hosts.json the command line reads, bad fields are the file's own one-line errors, and Run on adds
``--host`` to the forms' queries and Train. The connection itself is tested against a real sshd
(tests/ui/test_remote_window.py)."""
from __future__ import annotations

import json

from stub_run import StubRun

from gui_app.core.ssh_hosts import Host, add_host, hosts_path, load_hosts
from gui_app.ui.dialogs.hosts import HostsDialog, describe_test
from gui_app.ui.settings import load_settings
from gui_app.ui.window.main_window import MainWindow
from gui_app.ui.window.run_place import THIS_COMPUTER, RunPlace
from gui_app.ui.window.window_state import WindowState

GPU = "rs-gpu1.invalid"  # never resolves: the run list's reading of its runs fails at once, offline


def _dialog(qtbot, fake_engine) -> HostsDialog:
    dialog = HostsDialog(fake_engine)
    qtbot.addWidget(dialog)
    return dialog


def test_add_change_and_remove_write_the_shared_hosts_file(qtbot, fake_engine):
    dialog = _dialog(qtbot, fake_engine)
    assert dialog.list.count() == 0 and not dialog.test_button.isEnabled()
    dialog.name.setText("gpu1")
    dialog.port.setValue(2222)
    dialog.command.setText("~/venv/bin/replica-studio")
    assert dialog.save()
    dialog.new_button.click()
    dialog.name.setText("me@gpu2")
    dialog.runs_dir.setText("/data/runs")
    assert dialog.save()
    assert load_hosts() == {"gpu1": Host("gpu1", 2222, "~/venv/bin/replica-studio"),
                            "me@gpu2": Host("me@gpu2", runs_dir="/data/runs")}
    assert [dialog.list.item(i).text() for i in range(dialog.list.count())] == ["gpu1", "me@gpu2"]
    dialog.list.setCurrentRow(0)  # edit: the stored entry in the fields, changed and saved again
    assert (dialog.name.text(), dialog.port.value(), dialog.runs_dir.text()) == ("gpu1", 2222, "")
    dialog.port.setValue(0)  # ssh's own port
    assert dialog.save()
    assert load_hosts()["gpu1"].port is None
    dialog.list.setCurrentRow(1)
    dialog.remove()
    assert list(load_hosts()) == ["gpu1"] and json.loads(hosts_path().read_text())["schema_version"] == 1


def test_bad_fields_show_the_files_own_error_and_save_nothing(qtbot, fake_engine):
    dialog = _dialog(qtbot, fake_engine)
    dialog.name.setText("gpu 1")
    assert not dialog.save()
    assert dialog.error.text().startswith("host: an ssh destination (user@host or an alias) has no spaces")
    dialog.name.setText("-oProxyCommand=x")
    assert not dialog.save() and "does not start with '-'" in dialog.error.text()
    assert not hosts_path().exists()
    dialog.name.setText("gpu1")
    assert dialog.save() and dialog.error.text() == ""


def test_an_unreadable_hosts_file_is_said_and_kept(qtbot, fake_engine):
    hosts_path().parent.mkdir(parents=True, exist_ok=True)
    hosts_path().write_text('{"schema_version": 9, "hosts": []}')
    dialog = _dialog(qtbot, fake_engine)
    assert "schema_version 9" in dialog.error.text()
    assert hosts_path().read_text() == '{"schema_version": 9, "hosts": []}'


def test_the_test_result_says_the_release_and_devices():
    gpus = [{"name": "GPU:0"}, {"name": "GPU:1"}]
    answer = {"name": "gpu1", "version": "0.1.0", "devices": {"tensorflow": "2.21.0", "gpus": gpus,
                                                              "cpu": {"description": "AMD EPYC", "cores": 2}}}
    assert describe_test(answer) == (
        "Connected: replica-studio 0.1.0 there, TensorFlow 2.21.0; 2 GPUs; CPU AMD EPYC, 2 cores")


def test_run_on_adds_the_host_to_the_queries_and_is_remembered(qtbot, fake_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # ssh's shared connections: the test's own folder
    add_host(Host(GPU))
    state = WindowState(StubRun(), tmp_path)
    place = RunPlace(fake_engine, state)
    assert place.command("devices", "--json") == fake_engine("devices", "--json")
    with qtbot.waitSignal(place.changed):
        place.set_host(GPU)
    assert place.command("devices", "--json")[-3:] == ["--json", "--host", GPU]
    assert state.run_on == Host(GPU)  # the choice is the state's, not the place's
    window = MainWindow(engine_command=fake_engine)
    qtbot.addWidget(window)
    assert [window.run_on.itemText(i) for i in range(window.run_on.count())] == [THIS_COMPUTER, GPU]
    window.run_on.setCurrentIndex(1)
    window.run_on.activated.emit(1)
    assert window.place.name == GPU and load_settings().run_on == GPU
    window.config_panel.devices.cancel_detection()
    window.config_panel.inspector.cancel()
    window.close()
    again = MainWindow(engine_command=fake_engine)
    qtbot.addWidget(again)
    assert again.place.name == GPU and again.run_on.currentText() == GPU
    dialog = again.open_hosts()
    dialog.list.setCurrentRow(0)
    dialog.remove()  # the host goes: the window runs here again
    assert again.place.host is None and again.run_on.currentText() == THIS_COMPUTER
    dialog.reject()
    again.close()
