"""How the window tells that a sweep it follows has ended: ``outcome`` from the sweep's log and
status, and the view's ``ended`` signal, which reaches the desktop notifications."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtWidgets import QApplication

from sweep_dirs import Trial, write_sweep

from gui_app.core.answers import SweepStatus, SweepTrial
from gui_app.core.run_lock import RunLock
from gui_app.ui.sweep.figures import outcome
from gui_app.ui.sweep.view import TAIL_BYTES, last_lines

STATUS = SweepStatus("/s", trials=[SweepTrial(0, "completed"), SweepTrial(1, "pruned")])
COMPLETED = "sweep completed: 2 trials (1 completed, 1 pruned, 0 failed, 0 stopped)"


def test_the_sweeps_last_words_say_how_it_ended():
    assert outcome(STATUS, ["trial 1 pruned: ...", COMPLETED]) == ("completed", COMPLETED)
    stopped = "sweep stopped: 2 trials (1 completed, 0 pruned, 0 failed, 1 stopped)"
    assert outcome(STATUS, [stopped, "replica-studio sweep resume /s  # continues it"]) == ("stopped", stopped)
    assert outcome(STATUS, ["trial 0 started: ...", "Traceback (most recent call last):", "MemoryError"]) == (
        "failed", "MemoryError; Resume continues it")
    open_trial = SweepStatus("/s", trials=[SweepTrial(0, "running")])
    assert outcome(open_trial, []) == ("failed", "its process ended; Resume continues it")  # killed


def test_a_sweep_started_without_a_log_ends_as_its_trials_say():
    assert outcome(STATUS, []) == ("completed", "2 trials")
    assert outcome(replace(STATUS, stop_asked=True), []) == ("stopped", "stopped; Resume continues it")


def test_a_followed_sweep_that_ends_is_notified(qtbot, make_window, tmp_path):
    window = make_window()
    sent = []
    window.notifications.notifier.notify = lambda *notice: sent.append(notice)
    window.notifications.enabled = True
    sweep_dir = write_sweep(tmp_path / "sweeps", [Trial(0.001, 64, "completed", (0.8, 0.9))])
    lock = RunLock(sweep_dir).acquire()  # the sweep's process, as status sees it
    with qtbot.waitSignal(window.sweeps.view_opened) as opened:
        window.sweeps.open_sweep(str(sweep_dir))
    view = opened.args[0]
    qtbot.waitUntil(lambda: view.status is not None, timeout=30_000)
    assert view.status.running and view.stop_button.isEnabled() and not view.resume_button.isEnabled()
    view.hide()  # the user is elsewhere: none of the window's windows is the active one
    window.hide()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is None, timeout=5_000)

    Path(sweep_dir, "sweep.log").write_text(f"trial 0 started: ...\n{COMPLETED}\n")
    lock.release()
    with qtbot.waitSignal(view.ended, timeout=30_000) as ended:
        pass  # the next poll (2 s) sees the sweep's process gone
    assert ended.args == ["completed", str(sweep_dir), COMPLETED]
    assert sent == [("Sweep completed", f"{sweep_dir.name}: {COMPLETED}", False)]
    assert view.resume_button.isEnabled() and not view.stop_button.isEnabled()
    view.close()


def test_stop_asks_the_sweeps_process_to_stop_and_the_view_sees_it_stopped(qtbot, fake_engine, tmp_path):
    from gui_app.ui.sweep.view import SweepView

    sweep_dir = write_sweep(tmp_path / "sweeps", [Trial(0.001, 64, "completed", (0.8, 0.9))])
    lock = RunLock(sweep_dir).acquire()
    view = SweepView(str(sweep_dir), fake_engine)
    qtbot.addWidget(view)
    qtbot.waitUntil(lambda: view.status is not None and view.stop_button.isEnabled(), timeout=30_000)
    view.stop_button.click()
    qtbot.waitUntil(lambda: Path(sweep_dir, "stop").exists(), timeout=30_000)  # `sweep stop` asked it
    qtbot.waitUntil(lambda: view.status.stop_asked and "stopping" in view.header.text(), timeout=30_000)
    assert not view.stop_button.isEnabled()
    stopped = "sweep stopped: 1 trials (1 completed, 0 pruned, 0 failed, 0 stopped)"
    Path(sweep_dir, "sweep.log").write_text(f"{stopped}\nreplica-studio sweep resume {sweep_dir}  # continues it\n")
    with qtbot.waitSignal(view.ended, timeout=30_000) as ended:
        lock.release()  # the sweep's process has stopped its trials and ends
    assert ended.args[0::2] == ["stopped", stopped]
    qtbot.waitUntil(lambda: view.resume_button.isEnabled(), timeout=30_000)  # once `sweep stop` has returned
    assert view.message.text() in (stopped, "Stopped; each trial wrote a checkpoint. Resume continues the sweep.")
    view.close()


def test_the_window_reads_only_the_end_of_a_long_sweep_log(tmp_path):
    log = tmp_path / "sweep.log"
    log.write_text("".join(f"trial {i} started: a line of the sweep's log\n" for i in range(20_000)) + COMPLETED + "\n")
    assert log.stat().st_size > 10 * TAIL_BYTES
    assert last_lines(log, 3) == ["trial 19998 started: a line of the sweep's log",
                                  "trial 19999 started: a line of the sweep's log", COMPLETED]
    log.write_text("one\ntwo\n")
    assert last_lines(log, 20) == ["one", "two"] and last_lines(tmp_path / "gone.log", 20) == []
