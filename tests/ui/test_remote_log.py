"""RemoteLog, the Log tab's follower of a host's run's engine.log, on a run here (the same
``log --follow --json`` it runs over ssh): its lines once each across a dropped follower, and
its end waited for once the run has ended. (Over a real sshd: tests/ui/test_remote_window_tabs.py.)"""
from __future__ import annotations

from gui_app.core.run_lock import RunLock
from gui_app.identity import app_command
from gui_app.ui.workers.remote_log import RemoteLog


def test_lines_once_each_across_a_dropped_follower_then_its_end(qtbot, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text("{}")
    (run_dir / "engine.log").write_text("one\ntwo\n")
    lock = RunLock(run_dir).acquire()
    commands: list[list[str]] = []
    follower = RemoteLog(lambda start: commands.append(app_command("log", str(run_dir), "--follow", "--json",
                                                                   "--from", start)) or commands[-1], from_end=False)
    lines: list[str] = []
    follower.line.connect(lines.append)
    try:
        follower.follow()
        qtbot.waitUntil(lambda: lines == ["one", "two"], timeout=30_000)
        follower.follow()  # followed already: nothing new starts
        assert len(commands) == 1
        follower.stop()  # as a dropped connection ends it
        qtbot.waitUntil(lambda: not follower.is_running(), timeout=10_000)
        with (run_dir / "engine.log").open("a") as log:
            log.write("three\n")
        follower.follow()  # the next attach follows it again, from where it was
        assert commands[-1][-1] == "8"
        qtbot.waitUntil(lambda: lines == ["one", "two", "three"], timeout=30_000)
        later: list[str] = []
        attached = RemoteLog(lambda start: app_command("log", str(run_dir), "--follow", "--json", "--from", start),
                             from_end=True)  # a window that attaches: what was logged before is not its
        attached.line.connect(later.append)
        attached.follow()
        qtbot.waitUntil(lambda: attached.offset is not None, timeout=30_000)
        with (run_dir / "engine.log").open("a") as log:
            log.write("four, its last words\n")
        qtbot.waitUntil(lambda: later == ["four, its last words"], timeout=30_000)
        attached.stop()
        lock.release()  # the run has ended: its last lines come before the end is told
        ended: list[list[str]] = []
        follower.end(lambda: ended.append(list(lines)))
        qtbot.waitUntil(lambda: bool(ended), timeout=10_000)
        assert ended == [["one", "two", "three", "four, its last words"]] and not follower.is_running()
    finally:
        follower.stop()
        lock.release()
