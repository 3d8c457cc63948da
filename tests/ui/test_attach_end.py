"""When ``attach`` says a run's process is gone, the attachment asks whether the run really ended
(its lock; its scheduler: squeue, kubectl, which may take seconds) on a thread, never on the GUI
thread, and the window is told what it was told before: the run went on (attached again) or
why it ended. Here ``attach`` is a process that exits 1 at once, and the check is slowed down."""
from __future__ import annotations

import sys
import threading
import time

from gui_gaps import gui_thread_gaps
from run_dirs import write_run

from gui_app.core.backends import HereBackend
from gui_app.core.live_runs import RunProcess
from gui_app.ui.workers import attach_reads
from gui_app.ui.workers.attachment import DETACHED, KILLED_MESSAGE, REATTACHING, Attachment

ATTACH_SAYS_GONE = [sys.executable, "-c", "import sys; sys.exit(1)"]  # attach's exit 1: the process is gone


def _attach_gone(*_args: str) -> list[str]:
    return ATTACH_SAYS_GONE


def _slow_check(monkeypatch, answers: list[RunProcess | None], delay_s: float,
                on_gui: list[bool], release: threading.Event | None = None) -> None:
    """The run's lock and its scheduler's word, each asked slowly; the lock's answers in turn."""
    def live_process(_run_dir):
        on_gui.append(threading.current_thread() is threading.main_thread())
        if release is not None:
            release.wait(10)
        time.sleep(delay_s)
        return answers.pop(0)

    def job_active(_backend):
        on_gui.append(threading.current_thread() is threading.main_thread())
        return False

    monkeypatch.setattr(attach_reads, "live_process", live_process)
    monkeypatch.setattr(HereBackend, "job_active", job_active)


def test_the_check_after_attach_ends_runs_off_the_gui_thread_with_the_same_outcome(qtbot, runs_dir, monkeypatch):
    run = write_run(runs_dir, "20261201-090000-digits", None)
    on_gui: list[bool] = []
    still_running = RunProcess(pid=1, host="here", command="train", detached=True, started=0.0)
    _slow_check(monkeypatch, [still_running, None], 1.0, on_gui)  # it goes on the first time, is gone the next
    attachment = Attachment(_attach_gone, run_dir=str(run), from_line=12)
    notices: list[str] = []
    ends: list[tuple[str, str]] = []
    attachment.notice.connect(notices.append)
    attachment.ended.connect(lambda status, message: ends.append((status, message)))
    with gui_thread_gaps() as gaps:
        attachment.start()
        qtbot.waitUntil(lambda: bool(ends), timeout=20_000)
    assert notices[0] == REATTACHING  # the first check: its process still holds the lock, so attach again
    assert ends == [("failed", KILLED_MESSAGE)]  # the second: gone without a word of why
    assert on_gui and not any(on_gui)
    assert max(gaps) < 0.7, max(gaps)  # two checks of 1 s each, and the GUI thread never waited for them


def test_letting_go_while_the_run_is_checked_ends_once_as_detached(qtbot, runs_dir, monkeypatch):
    run = write_run(runs_dir, "20261201-090000-digits", None)
    release, on_gui = threading.Event(), []
    _slow_check(monkeypatch, [None], 0.0, on_gui, release)
    attachment = Attachment(_attach_gone, run_dir=str(run), from_line=12)
    ends: list[str] = []
    attachment.ended.connect(lambda status, _message: ends.append(status))
    attachment.start()
    qtbot.waitUntil(lambda: bool(on_gui), timeout=10_000)  # the check is under way
    attachment.detach()  # the window closes meanwhile
    release.set()
    qtbot.waitUntil(lambda: not attachment._background.busy(), timeout=10_000)
    assert ends == [DETACHED]


def test_a_resumes_start_line_is_found_off_the_gui_thread(qtbot, runs_dir, monkeypatch):
    """A resume here is followed from its own run_started: finding that line reads the whole
    events file (hundreds of MB for a long run), on a thread, not the GUI thread."""
    run = write_run(runs_dir, "20261201-090000-digits", None)
    on_gui: list[bool] = []

    def slow_last_start(_run_dir):
        on_gui.append(threading.current_thread() is threading.main_thread())
        time.sleep(1.0)
        return 7, 1234

    monkeypatch.setattr(attach_reads, "last_start", slow_last_start)
    asked: list[tuple[str, ...]] = []

    def engine_command(*args: str) -> list[str]:
        asked.append(args)
        return ATTACH_SAYS_GONE

    started = [sys.executable, "-c", f"print({str(run)!r})"]  # resume --detach answers the run
    attachment = Attachment(engine_command, start_command=started, run_dir=str(run), from_line=-1)
    with gui_thread_gaps() as gaps:
        attachment.start()
        qtbot.waitUntil(lambda: bool(asked), timeout=20_000)
        qtbot.wait(60)
    attachment.detach()
    assert asked[0] == ("attach", str(run), "--from", "0", "--from-byte", "1234")  # by its byte: no lines counted
    assert on_gui == [False]
    assert max(gaps) < 0.7, max(gaps)


def test_attaching_after_a_finished_runs_last_line_ends_with_its_status_not_a_loop(qtbot, runs_dir, fake_engine):
    """The window read a run's file (run_finished included) and then attached after its last line:
    attach (the real command) says the run has finished (0) without a line to send. The attachment
    takes the ending from the run's events, once, instead of attaching again and again."""
    run = write_run(runs_dir, "20261201-090000-digits", "stopped", message="stopped by the user")
    lines = len((run / "events.jsonl").read_bytes().splitlines())
    attachment = Attachment(fake_engine, run_dir=str(run), from_line=lines)
    notices: list[str] = []
    ends: list[tuple[str, str]] = []
    attachment.notice.connect(notices.append)
    attachment.ended.connect(lambda status, message: ends.append((status, message)))
    attachment.start()
    qtbot.waitUntil(lambda: bool(ends), timeout=20_000)
    assert ends == [("stopped", "stopped by the user")]
    assert REATTACHING not in notices
