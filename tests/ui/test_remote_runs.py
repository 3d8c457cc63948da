"""The run list's rows of a host's runs, without a host: their keys, what ``runs --json`` there
gives a row, a host that does not answer (a name that does not resolve: ssh fails at once) as one
line beside the list, and a slow one (a fake ssh on PATH: tests/ui/fake_ssh.py) that never stops
the GUI thread. With a real host: tests/ui/test_remote_window.py."""
from __future__ import annotations

import json
import os
import pwd
import time
from pathlib import Path

from PySide6.QtWidgets import QLabel

import fake_ssh
from gui_gaps import gui_thread_gaps
from run_dirs import listed_status, wait_listed, write_run
from windows import shown_window

from gui_app.core.answers import RunRow, decode
from gui_app.core.live_runs import list_live_runs
from gui_app.core.ssh_hosts import Host, add_host, run_key, split_run_key
from gui_app.identity import app_command
from gui_app.ui.settings import Settings
from gui_app.ui.window.remote_runs import _row, host_rows
from gui_app.ui.window.run_rows import COLUMNS, HOST, NOTE
from gui_app.ui.window.runs_panel import RunsPanel
from gui_app.ui.window.window_state import WindowState
from gui_app.ui.workers.supervisor import RunSupervisor


def test_keys_of_runs_there_never_collide_with_paths_here():
    key = run_key("me@gpu1", "/home/me/runs/a")
    assert key == "me@gpu1:/home/me/runs/a" and split_run_key(key) == ("me@gpu1", "/home/me/runs/a")
    assert split_run_key("/home/me/runs/a") == (None, "/home/me/runs/a")
    assert split_run_key("relative:path") == (None, "relative:path")


def test_a_row_from_runs_json_there(runs_dir):
    write_run(runs_dir, "20261201-090000-digits", "completed", accuracy=0.9)
    (entry,) = json.loads(json.dumps([run.to_json() for run in list_live_runs(runs_dir)]))
    info, resumable, process, host = _row("gpu1", decode(RunRow, entry))
    assert str(info.path) == f"gpu1:{runs_dir / '20261201-090000-digits'}" and info.name == "20261201-090000-digits"
    assert (info.status, info.step, info.test_accuracy, info.config.dataset.name) == ("completed", 10, 0.9, "digits")
    assert (resumable, process, host) == (False, None, "gpu1")
    running = {**entry, "status": "running", "pid": 42, "host": "gpu1-node", "config": {}}
    info, _, process, _ = _row("gpu1", decode(RunRow, running))
    assert (process.pid, process.host) == (42, "gpu1-node")
    write_run(runs_dir, "20261201-100000-digits", "stopped")  # with a checkpoint: resumable there, as read there
    stopped = next(run.to_json() for run in list_live_runs(runs_dir) if run.info.status == "stopped")
    assert stopped["resumable"] and _row("gpu1", decode(RunRow, stopped))[1] is True
    assert (entry["owner"], entry["own"]) == (pwd.getpwuid(os.getuid()).pw_name, True)  # who started it there


def test_the_runs_other_users_left_on_the_host_are_not_listed(runs_dir):
    write_run(runs_dir, "20261201-090000-digits", "completed")
    write_run(runs_dir, "20261201-100000-digits", "stopped")
    mine, theirs = [run.to_json() for run in list_live_runs(runs_dir)]
    printed = json.dumps([mine, {**theirs, "owner": "someone-else", "own": False}])
    assert [str(info.path) for info, *_ in host_rows("gpu1", f"a login banner\n{printed}\n")] == [
        f"gpu1:{mine['run_dir']}"]
    del theirs["own"]  # an older app there does not say: its runs are listed
    assert len(host_rows("gpu1", json.dumps([mine, theirs]))) == 2


def test_a_host_that_does_not_answer_is_one_line_and_the_runs_here_come_back_with_this_computer(
        qtbot, runs_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # ssh's shared connections: the test's own folder
    here = write_run(runs_dir, "20261201-090000-digits", "completed")
    supervisor = RunSupervisor()
    state = WindowState(supervisor, runs_dir)
    panel = RunsPanel(state, host=Host("rs-no-such-host.invalid"))
    qtbot.addWidget(panel)
    told = []
    panel.host_failed.connect(told.append)
    try:
        wait_listed(qtbot, panel)
        assert listed_status(panel, here) is None  # Run on the host: its runs, not this computer's
        # The host's own failure: the window's Devices section tells it whole; the list points there.
        assert told and told[0].startswith("rs-no-such-host.invalid: unknown host (ssh: Could not resolve")
        assert panel.reading_label.text() == "rs-no-such-host.invalid: its runs are not listed (see Devices)"
        assert panel.tree.isColumnHidden(HOST)  # no run of another machine listed
        state.set_run_on(None)
        wait_listed(qtbot, panel)
        assert panel.reading_label.text() == "" and listed_status(panel, here) == "completed"
    finally:
        panel.stop_reading()
        supervisor.close()


def test_with_run_on_a_host_the_list_is_its_runs_with_the_host_column_in_view(qtbot, runs_dir, tmp_path,
                                                                             monkeypatch):
    here = write_run(runs_dir, "20261201-090000-digits", "completed")
    there = write_run(runs_dir.parent / "there", "20261201-100000-digits", "failed",
                      message="a long reason why the run failed, " * 6)
    printed = json.dumps([run.to_json() for run in list_live_runs(there.parent)])
    fake_ssh.install(tmp_path, monkeypatch, f"a login banner\n{printed}")  # runs --json there, printed here
    supervisor = RunSupervisor()
    state = WindowState(supervisor, runs_dir)
    panel = RunsPanel(state, host=Host("gpu1"))
    qtbot.addWidget(panel)
    panel.resize(900, 300)
    panel.show()
    try:
        wait_listed(qtbot, panel)
        key = f"gpu1:{there}"
        assert listed_status(panel, key) == "failed" and listed_status(panel, here) is None
        tree = panel.tree
        assert not tree.isColumnHidden(HOST) and tree.topLevelItem(0).text(HOST) == "gpu1"
        # Left of the Note, whose long reason stretches last: in view, not pushed off the right edge.
        header = tree.header()
        assert header.visualIndex(HOST) < header.visualIndex(NOTE) == len(COLUMNS) - 1
        assert header.sectionViewportPosition(HOST) + header.sectionSize(HOST) <= tree.viewport().width()
        state.set_run_on(None)
        wait_listed(qtbot, panel)
        assert listed_status(panel, here) == "completed" and listed_status(panel, key) is None
        assert tree.isColumnHidden(HOST)
    finally:
        panel.stop_reading()
        supervisor.close()


def test_a_run_on_host_that_cannot_be_reached_is_told_once_on_the_devices_section(qtbot, fake_engine, tmp_path,
                                                                                  monkeypatch):
    """Detection, the dataset check and the run list all meet the host's failure: the whole line
    once, on the Devices section; the Dataset section, the Dataset tab, Train's tooltip and the
    run list's footer point there."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # ssh's shared connections: the test's own folder
    name = "rs-no-such-host.invalid"
    add_host(Host(name))

    def engine(*args: str) -> list[str]:  # what runs there is the real --host (ssh fails at once, no TensorFlow)
        return app_command(*args) if "--host" in args else fake_engine(*args)

    with shown_window(qtbot, settings=Settings(run_on=name), engine_command=engine) as window:
        panel = window.config_panel
        with qtbot.waitSignals([panel.devices.detection_failed, panel.inspect_failed, window.runs.filled],
                               timeout=60_000):
            window.start()
        qtbot.waitUntil(lambda: not window.runs.is_filling())
        line = panel.devices.status.text().removeprefix("Device detection failed: ")
        assert line.startswith(f"{name}: unknown host (ssh: Could not resolve hostname") and \
            line.endswith("check the name, or add it to ~/.ssh/config")
        pointer = f"{name} cannot run commands (see Devices)"
        assert panel.dataset.status.text() == f"Not checked: {pointer}" and panel.dataset.check_again_link.isVisible()
        assert window.dataset_tab.notes.text() == f"Not checked: {pointer}"
        assert window.window_actions.train.toolTip() == f"Dataset and model not checked: {pointer}"
        assert window.runs.reading_label.text() == f"{name}: its runs are not listed (see Devices)"
        shown = [label.text() for label in window.findChildren(QLabel) if label.isVisible()]
        assert sum("Could not resolve" in text for text in shown) == 1, shown


def test_the_run_list_lists_where_the_states_run_on_says(qtbot, runs_dir, tmp_path, monkeypatch):
    """Nothing tells the list but the state: its run_on signal moves the list to the host's runs
    and back (the toolbar's Run on list only sets the state)."""
    here = write_run(runs_dir, "20261201-090000-digits", "completed")
    there = write_run(runs_dir.parent / "there", "20261201-100000-digits", "failed")
    printed = json.dumps([run.to_json() for run in list_live_runs(there.parent)])
    fake_ssh.install(tmp_path, monkeypatch, f"a login banner\n{printed}")  # runs --json there, printed here
    supervisor = RunSupervisor()
    state = WindowState(supervisor, runs_dir)
    panel = RunsPanel(state)
    qtbot.addWidget(panel)
    try:
        wait_listed(qtbot, panel)
        assert listed_status(panel, here) == "completed"
        state.set_run_on(Host("gpu1"))
        qtbot.waitUntil(lambda: listed_status(panel, f"gpu1:{there}") == "failed")
        assert listed_status(panel, here) is None
        state.set_run_on(None)
        qtbot.waitUntil(lambda: listed_status(panel, here) == "completed")
        assert listed_status(panel, f"gpu1:{there}") is None
    finally:
        panel.stop_reading()
        supervisor.close()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def test_a_slow_host_never_stops_the_gui_thread_and_the_newest_listing_wins(qtbot, runs_dir, tmp_path, monkeypatch):
    """ssh that takes 2 s to answer: the GUI thread's timers keep ticking meanwhile, a refresh ends
    the older listing's ssh (listings never pile up behind a slow host), and stopping the list
    (the window closes) does not wait for the one under way."""
    there = write_run(runs_dir.parent / "there", "20261201-100000-digits", "failed")
    printed = json.dumps([run.to_json() for run in list_live_runs(there.parent)])
    fake = fake_ssh.install(tmp_path, monkeypatch, printed, delay_s=2.0)
    supervisor = RunSupervisor()
    state = WindowState(supervisor, runs_dir)
    panel = RunsPanel(state, host=Host("gpu1"))
    qtbot.addWidget(panel)
    try:
        with gui_thread_gaps() as gaps:
            qtbot.waitUntil(lambda: len(fake.calls()) == 1, timeout=10_000)  # its ssh is under way
            (first,) = fake.calls()
            panel.refresh()
            qtbot.waitUntil(lambda: not _alive(first), timeout=5_000)  # ended by the newer request
            wait_listed(qtbot, panel)
        assert listed_status(panel, f"gpu1:{there}") == "failed"
        calls = fake.calls()
        assert calls[first] == ["start"] and len(calls) == 2 and calls[max(calls)] == ["start", "end"]
        assert len(gaps) > 50 and max(gaps) < 1.0, max(gaps)  # 2 s of ssh, and the GUI thread never waited
        panel.refresh()
        qtbot.waitUntil(lambda: len(fake.calls()) == 3, timeout=10_000)
        started = time.monotonic()
        panel.stop_reading()
        assert time.monotonic() - started < 0.5
        third = max(fake.calls())
        qtbot.waitUntil(lambda: not _alive(third), timeout=5_000)
        assert fake.calls()[third] == ["start"]
    finally:
        panel.stop_reading()
        supervisor.close()


def test_a_host_whose_ssh_fails_is_one_line_in_the_list(qtbot, runs_dir, tmp_path, monkeypatch):
    fake_ssh.install(tmp_path, monkeypatch, printed=None)  # ssh's own failure: exit 255
    supervisor = RunSupervisor()
    state = WindowState(supervisor, runs_dir)
    panel = RunsPanel(state, host=Host("gpu1"))
    qtbot.addWidget(panel)
    told: list[str] = []
    panel.host_failed.connect(told.append)
    try:
        wait_listed(qtbot, panel)
        assert told == ["gpu1: unreachable (ssh: connect to host gpu1 port 22: Connection refused); is it on, "
                        "and sshd running there?"]
        assert panel.reading_label.text() == "gpu1: its runs are not listed (see Devices)"
    finally:
        panel.stop_reading()
        supervisor.close()
