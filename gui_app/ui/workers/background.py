"""Background: work off the GUI thread that never touches Qt there.

:meth:`Background.run` calls ``work(send, *args)`` on a Python thread of its own; each
``send(value)`` reaches ``deliver(value)`` on the GUI thread, in order, collected by a timer
(every ``interval_ms`` while some work is under way). An exception that ends the work reaches
``failed(exc)`` on the GUI thread the same way.

Why not a QThread and queued signals (what the run list, the compare dialog and the sweep's
curves used): the window deadlocked, rarely and for good, when Qt ran a QObject's destructor on
one thread while another thread held the GIL. Qt holds a signal-slot mutex (one of a small pool,
shared by address) while it tells each sender of the dying object that it lost a connection,
and PySide takes the GIL in that call to look for a Python override; the other thread, holding
the GIL, waited for the same pooled mutex in an ``emit`` or a ``connect``. Measured with gdb on
a hung test run: the supervisor's thread in ``~QObject`` -> ``Sbk_GetPyOverride`` ->
``PyGILState_Ensure``, the GUI thread in ``QGraphicsTextItem::setDefaultTextColor`` ->
``QObject::connectImpl`` -> ``QBasicMutex::lockInternal``. So every QObject lives, emits and dies
on the GUI thread, and a background thread holds only Python values: the queue between them is
a ``queue.SimpleQueue``, which needs no Qt lock.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS = 25  # how often the GUI thread collects while work is under way (a check costs microseconds)
_SENT, _FAILED, _ENDED = range(3)

Send = Callable[[Any], None]


class Background(QObject):
    def __init__(self, parent: QObject | None = None, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        self._queue: queue.SimpleQueue[tuple[int, int, Any]] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # The callbacks stay here, on the GUI thread: a thread that held one (a bound method of a
        # widget) could drop the last reference to a Qt object there when it ends.
        self._tasks: dict[int, tuple[Callable[[Any], Any], Callable[[BaseException], Any]]] = {}
        self._last_task = 0
        self._timer = QTimer(self, interval=interval_ms)
        self._timer.timeout.connect(self.collect)

    def run(self, work: Callable[..., Any], *args: Any, deliver: Callable[[Any], Any],
            failed: Callable[[BaseException], Any] | None = None, name: str = "background") -> None:
        """Start ``work(send, *args)`` on a new thread; ``deliver`` and ``failed`` run on the GUI
        thread. ``work`` and ``args`` are plain Python (no Qt object): the thread lets go of them."""
        self._last_task += 1
        task = self._last_task
        self._tasks[task] = (deliver, failed or _raise)
        put = self._queue.put

        def target() -> None:
            try:
                work(lambda value: put((task, _SENT, value)), *args)
            except BaseException as exc:  # noqa: BLE001  (handed to the GUI thread, whatever it is)
                put((task, _FAILED, exc))
            finally:
                put((task, _ENDED, None))

        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()
        self._timer.start()

    def busy(self) -> bool:
        """Some work is under way, or its values are not all delivered yet."""
        return bool(self._tasks)

    def wait(self, timeout_s: float = 10.0) -> None:
        """Wait for the work under way (the window closes); what it sent is dropped."""
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads = [t for t in self._threads if t.is_alive()]
        self._tasks.clear()
        self._timer.stop()
        while not self._queue.empty():
            self._queue.get_nowait()

    def collect(self) -> None:
        """Deliver what the work has sent so far (the timer calls this; a test may too)."""
        while True:
            try:
                task, kind, value = self._queue.get_nowait()
            except queue.Empty:
                break
            callbacks = self._tasks.get(task)
            if callbacks is None:  # dropped by wait()
                continue
            if kind == _ENDED:
                del self._tasks[task]
            else:
                callbacks[kind](value)  # may start more work
        self._threads = [t for t in self._threads if t.is_alive()]
        if not self._tasks:
            self._timer.stop()


def _raise(exc: BaseException) -> None:
    raise exc
