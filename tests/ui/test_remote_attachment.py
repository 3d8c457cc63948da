"""How the attachment to a run on an SSH host reads ssh's end, without a host: a name that does
not resolve makes the real ssh exit 255 at once, as a dropped connection does. That is never the
run's end: the attachment says "connection to HOST lost, reconnecting…" and tries again with
back-off until the window lets go. (Against a real sshd: tests/ui/test_remote_window.py.)"""
from __future__ import annotations

from gui_app.core.ssh_hosts import Host
from gui_app.ui.workers.attach_reads import BACKOFF_FIRST_S
from gui_app.ui.workers.attachment import CONNECTION_LOST, DETACHED, Attachment


def _never_local(*args: str) -> list[str]:
    raise AssertionError(f"a run on a host is never followed by a local command: {args}")


def test_ssh_exit_255_is_a_lost_connection_tried_again(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # ssh's shared connections: the test's own folder
    host = Host("rs-no-such-host.invalid")
    attachment = Attachment(_never_local, run_dir="/home/me/runs/a", from_line=12, host=host)
    notices: list[str] = []
    attachment.notice.connect(notices.append)
    ends: list[tuple[str, str]] = []
    attachment.ended.connect(lambda *end: ends.append(end))
    commands: list[list[str]] = []
    original = attachment._attach_command
    attachment._attach_command = lambda: commands.append(original()) or commands[-1]
    attachment.start()
    qtbot.waitUntil(lambda: len(commands) >= 3, timeout=int((BACKOFF_FIRST_S * 3 + 10) * 1000))  # 0.5 s, then 1 s
    assert notices == [CONNECTION_LOST.format(host=host.name)] and not ends
    assert commands[0][0] == "ssh" and commands[0][-2] == host.name
    assert commands[-1][-1].endswith("attach /home/me/runs/a --from 12")  # from the last line it has, each time
    attachment.detach()
    assert ends == [(DETACHED, "the run goes on in the background")]


def test_a_run_resumed_on_a_host_is_followed_from_its_history_not_from_line_0(qtbot, tmp_path, monkeypatch):
    """Resumed there, the run's history comes as a first attach's does (attach --history: its
    pyramid and the lines after it), not as every line of its events file over ssh."""
    import sys

    from gui_app.ui.workers.supervisor import RunSupervisor

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    host = Host("rs-no-such-host.invalid")
    started = [sys.executable, "-c", "print('/home/me/runs/a')"]  # resume --detach --host answers the run

    def engine_command(*args: str) -> list[str]:
        return started if args[0] == "resume" else _never_local(*args)

    supervisor = RunSupervisor(engine_command)
    supervisor.start_resume("/home/me/runs/a", host=host)
    attachment = supervisor._worker._job
    commands: list[list[str]] = []
    original = attachment._attach_command
    attachment._attach_command = lambda: commands.append(original()) or commands[-1]
    qtbot.waitUntil(lambda: len(commands) >= 2, timeout=20_000)  # the first, then one after ssh's 255
    assert commands[0][-1].endswith("attach /home/me/runs/a --history")
    assert commands[1][-1].endswith("attach /home/me/runs/a --history")  # nothing came yet: the history still
    supervisor.close()
