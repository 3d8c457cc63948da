"""The GUI-thread collector: automatic collection is off, the timer collects what passed the
thresholds, on the GUI thread."""
from __future__ import annotations

import gc
import threading

from PySide6.QtCore import QCoreApplication, QEvent

from gui_app.ui import gc_guard


class Cycle:
    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        Cycle.seen.append(threading.current_thread() is threading.main_thread())


def test_cycles_are_collected_by_the_gui_thread_not_by_the_thread_that_allocates(qtbot, qapp):
    collector = gc_guard.install(qapp)
    assert not gc.isenabled()
    # Earlier tests' widgets, deleted later, would be freed while this test waits: each object
    # freed lowers generation 0's count, which can then stay under its threshold for seconds
    # (as the interpreter's own collector would) with the cycles below pending. Freed first.
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()
    Cycle.seen = []
    done = threading.Event()

    def allocate() -> None:  # far past generation 0's threshold: would have triggered a collection
        for _ in range(5 * gc.get_threshold()[0]):
            Cycle()
        done.set()

    worker = threading.Thread(target=allocate)
    worker.start()
    worker.join(30)
    assert done.is_set() and Cycle.seen == []  # nothing collected on the worker thread
    qtbot.waitUntil(lambda: len(Cycle.seen) > 0, timeout=5_000)
    collector.check()
    assert Cycle.seen and all(Cycle.seen)  # every one on the GUI thread


def test_what_start_up_built_is_out_of_the_collector_s_sight():
    gc_guard.freeze_startup()
    try:
        assert gc.get_freeze_count() > 10_000  # the modules, Qt's wrappers, pytest's own
    finally:
        gc.unfreeze()  # the tests that follow make and drop windows of their own
