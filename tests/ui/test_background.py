"""Background work reaches the GUI thread without a QObject on another thread (the window's
deadlock: gui_app/ui/workers/background.py), and the run's own objects live on the GUI thread."""
from __future__ import annotations

import threading

from PySide6.QtCore import QObject

from gui_app.core.config import RunConfig
from gui_app.ui.workers.background import Background
from gui_app.ui.workers.supervisor import RunSupervisor


def _count(send, n, seen_threads):
    seen_threads.append(threading.current_thread())
    for i in range(n):
        send(i)


def test_values_arrive_on_the_gui_thread_in_order(qtbot):
    background = Background()
    got, where, threads = [], [], []

    def deliver(value):
        got.append(value)
        where.append(threading.current_thread() is threading.main_thread())

    background.run(_count, 500, threads, deliver=deliver)
    qtbot.waitUntil(lambda: len(got) == 500 and not background.busy(), timeout=10_000)
    assert got == list(range(500)) and all(where)
    assert threads[0] is not threading.main_thread()


def test_a_failure_reaches_failed_and_work_can_start_more_work(qtbot):
    background = Background()
    failures, got = [], []

    def boom(send):
        raise OSError("disk gone")

    def deliver(value):
        got.append(value)
        if value == 0:  # started from a delivery: the collecting goes on for it
            background.run(_count, 3, [], deliver=got.append)

    background.run(boom, deliver=got.append, failed=failures.append)
    background.run(_count, 1, [], deliver=deliver)
    qtbot.waitUntil(lambda: len(got) == 4 and bool(failures), timeout=10_000)
    assert isinstance(failures[0], OSError) and str(failures[0]) == "disk gone"
    assert got == [0, 0, 1, 2]
    qtbot.waitUntil(lambda: not background.busy(), timeout=5_000)


def test_wait_ends_with_the_work_and_drops_what_it_sent(qtbot):
    background = Background()
    release, got = threading.Event(), []

    def slow(send):
        release.wait(5)
        send("late")

    background.run(slow, deliver=got.append)
    assert background.busy()
    release.set()
    background.wait()
    background.collect()
    assert got == [] and not background.busy()


def test_the_supervisors_objects_live_on_the_gui_thread(qtbot, fake_engine, tmp_path):
    """The attachment's processes and timers: a QObject destroyed on another thread while the GUI
    thread held the GIL deadlocked the window (gdb on a hung test run)."""
    supervisor = RunSupervisor(fake_engine)
    seen: list[set] = []
    supervisor.events.connect(lambda batch: seen.append({o.thread() for o in supervisor.findChildren(QObject)}))
    try:
        with qtbot.waitSignal(supervisor.finished, timeout=20_000) as finished:
            supervisor.start_train(RunConfig(), tmp_path / "runs")
        assert finished.args[0] == "completed"
        assert seen and len(supervisor.findChildren(QObject)) >= 1
        assert all(threads == {supervisor.thread()} for threads in seen)  # the attachment's too, while it ran
    finally:
        supervisor.close()
