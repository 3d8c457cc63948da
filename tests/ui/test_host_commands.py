"""No process on the GUI thread to reach an SSH host: an attachment's and Open's ssh command lines
are built once ``ssh -G`` has answered on a thread of their own (gui_app/ui/workers/host_commands.py),
and switching Run on starts none there either. Without a host: a name that does not resolve makes
ssh fail at once (``ssh -G`` itself needs no network)."""
from __future__ import annotations

import subprocess
import threading

import pytest
from run_dirs import wait_listed
from stub_run import StubRun

from gui_app.core.ssh_hosts import Host, add_host
from gui_app.ui.settings import Settings
from gui_app.ui.window.remote_runs import RemoteOpen
from gui_app.ui.window.window_state import WindowState
from gui_app.ui.workers.attachment import DETACHED, Attachment

HOST = "rs-no-such-host.invalid"


@pytest.fixture
def started(monkeypatch, tmp_path) -> list[tuple[bool, list[str]]]:
    """Every process started with subprocess: (on the GUI thread?, its first two words)."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # ssh's shared connections: the test's own folder
    calls: list[tuple[bool, list[str]]] = []
    popen = subprocess.Popen

    class Recorded(popen):  # type: ignore[misc, valid-type]
        def __init__(self, args, *rest, **options):
            calls.append((threading.current_thread() is threading.main_thread(), [str(a) for a in args][:2]))
            super().__init__(args, *rest, **options)

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    return calls


def _never_local(*args: str) -> list[str]:
    raise AssertionError(f"a run on a host is never followed by a local command: {args}")


def test_an_attachment_asks_ssh_off_the_gui_thread_and_builds_its_command_with_the_answer(qtbot, started):
    attachment = Attachment(_never_local, run_dir="/home/me/runs/a", from_line=3, host=Host(HOST))
    commands: list[list[str]] = []
    original = attachment._attach_command
    attachment._attach_command = lambda: commands.append(original()) or commands[-1]
    ends: list[str] = []
    attachment.ended.connect(lambda status, _message: ends.append(status))
    attachment.start()
    qtbot.waitUntil(lambda: len(commands) >= 2, timeout=20_000)  # ssh failed once (255): attached again
    attachment.detach()
    assert ends == [DETACHED]
    asked = [on_gui for on_gui, words in started if words == ["ssh", "-G"]]
    assert len(asked) >= 2 and not any(asked)  # asked again for each attach, never on the GUI thread
    assert not any(on_gui for on_gui, _words in started)
    # The answer is in the command line: a shared connection named from ssh -G's configuration.
    assert any(word.startswith("ControlPath=") and not word.endswith("none") for word in commands[0])


def test_open_replays_a_hosts_run_without_a_process_on_the_gui_thread(qtbot, started, runs_dir):
    state = WindowState(StubRun(), runs_dir)
    opener = RemoteOpen(state, shown=None)  # type: ignore[arg-type]  # nothing is shown: ssh fails
    notes: list[str] = []
    opener.note.connect(notes.append)
    opener.open(Host(HOST), "/home/me/runs/a")
    assert opener.is_reading()
    qtbot.waitUntil(lambda: bool(notes), timeout=20_000)
    assert notes[0].startswith(f"Cannot open {HOST}:/home/me/runs/a: ssh: Could not resolve hostname")
    assert [words for _on_gui, words in started][:1] == [["ssh", "-G"]]
    assert not any(on_gui for on_gui, _words in started)


def test_switching_run_on_starts_no_process_on_the_gui_thread(qtbot, started, fake_engine):
    from windows import shown_window

    add_host(Host(HOST))
    with shown_window(qtbot, settings=Settings(), engine_command=fake_engine) as window:
        wait_listed(qtbot, window.runs)
        window.run_on.setCurrentIndex(1)
        window.run_on.activated.emit(1)
        assert window.state.run_on == Host(HOST)
        wait_listed(qtbot, window.runs)  # the host's runs asked for (ssh fails at once)
        window.state.set_run_on(None)
        wait_listed(qtbot, window.runs)
    assert started and not any(on_gui for on_gui, _words in started), started
