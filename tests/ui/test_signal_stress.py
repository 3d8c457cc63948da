"""Ten thousand cross-thread emits must survive (PySide6 6.12.0 over-releases True in
Signal.emit and aborts after a few hundred on Python 3.11: docs/architecture.md, "Qt facts")."""
from __future__ import annotations

from PySide6.QtCore import QObject, QThread, Signal, Slot

from gui_app.ui.workers.supervisor import RunSupervisor

EMITS = 10_000


class Pump(QObject):
    flag = Signal(bool, list)
    done = Signal()

    @Slot()
    def run(self) -> None:
        for i in range(EMITS):
            self.flag.emit(i % 2 == 0, [True, False, None, {"ok": True}])
        self.done.emit()


class Sink(QObject):
    """Lives on the GUI thread, so every delivery from the pump is a queued one."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[tuple] = []

    @Slot(bool, list)
    def take(self, flag: bool, items: list) -> None:
        self.received.append((flag, items[0]))


def test_ten_thousand_bool_emits_across_threads(qtbot):
    thread, pump, sink = QThread(), Pump(), Sink()
    pump.moveToThread(thread)
    pump.flag.connect(sink.take)
    thread.started.connect(pump.run)
    try:
        thread.start()
        qtbot.waitUntil(lambda: len(sink.received) == EMITS, timeout=60_000)
    finally:
        thread.quit()
        thread.wait()
    assert sink.received[0] == (True, True) and sink.received[1] == (False, True)
    assert sum(1 for flag, _ in sink.received if flag is True) == EMITS // 2


def test_ten_thousand_event_batches_through_the_supervisor(qtbot):
    """The supervisor's own relay (worker thread -> GUI thread) under the same load."""
    supervisor = RunSupervisor()
    batches: list[list] = []
    supervisor.events.connect(batches.append)
    thread, pump = QThread(), Pump()
    pump.moveToThread(thread)
    # Re-emit the pump's signal as the worker's events signal, on the pump's thread.
    pump.flag.connect(lambda b, items: supervisor._worker.events.emit([{"type": "step", "ok": b}]))
    thread.started.connect(pump.run)
    try:
        thread.start()
        qtbot.waitUntil(lambda: len(batches) == EMITS, timeout=60_000)
    finally:
        thread.quit()
        thread.wait()
        supervisor.close()
    assert [b[0]["ok"] for b in batches[:4]] == [True, False, True, False]
