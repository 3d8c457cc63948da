"""TaskThread: one background thread that runs Python callables in order and hands their
results back on the GUI thread. The export dialog and the Try panel use it to keep
TensorFlow, TFLite and ONNX Runtime off the GUI thread.

    tasks = TaskThread("export", parent=self)
    tasks.submit(lambda report: export_run(..., progress=report),
                 on_success=self._on_done, on_failure=self._on_error, on_progress=self._on_progress)

A task receives ``report(fraction, message)`` for progress. Tasks run one after another, so
objects a task creates (an Interpreter, an InferenceSession) are only ever used from that one
thread. Every callback runs on the GUI thread: the worker's signals reach this object through
queued connections (a plain Python callable connected straight to a signal emitted on the
worker would run on the worker). The thread stops with the application, after its current task.

The thread runs its event loop from Python (:class:`_PythonThread`), so every task sees the
same ``threading.local`` data -- TensorFlow keeps its eager context there (see below).
"""
from __future__ import annotations

import itertools
import sys
import traceback
from typing import Any, Callable

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot

Report = Callable[[float, str], None]


class _PythonThread(QThread):
    """A QThread whose event loop runs inside a Python ``run()``, so the thread keeps one Python
    thread state for its whole life.

    A plain QThread has no Python frame between slot calls: each queued call gets a fresh
    thread state and ``threading.local`` data is dropped when it returns. TensorFlow keeps its
    thread's eager context and graph stack there; a task that uses TensorFlow after another
    task on the same thread imported it (load a model, then predict) segfaulted inside
    ``tf.function`` tracing (checked with TF 2.21, PySide6 6.11).
    """

    def run(self) -> None:  # Qt API
        self.exec()


def _stop(thread: QThread) -> None:
    if shiboken6.isValid(thread) and thread.isRunning():  # at interpreter exit it may be gone
        thread.quit()
        thread.wait()


class _Worker(QObject):
    succeeded = Signal(int, object)
    failed = Signal(int, object)
    progress = Signal(int, float, str)

    def __init__(self, expected: tuple[type[BaseException], ...]) -> None:
        super().__init__()
        self._expected = expected

    @Slot(int, object)
    def run(self, task_id: int, fn: Callable[[Report], Any]) -> None:
        try:
            result = fn(lambda fraction, message: self.progress.emit(task_id, float(fraction), str(message)))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the GUI as a value
            if not isinstance(exc, self._expected):  # a bug, not bad input: keep its traceback
                traceback.print_exc(file=sys.stderr)
            self.failed.emit(task_id, exc)
        else:
            self.succeeded.emit(task_id, result)


class TaskThread(QObject):
    _submit = Signal(int, object)

    def __init__(self, name: str, parent: QObject | None = None,
                 expected: tuple[type[BaseException], ...] = (ValueError,)) -> None:
        """``expected`` exceptions are reported as they are; others also print a traceback."""
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._callbacks: dict[int, tuple[Callable | None, Callable | None, Callable | None]] = {}
        self._thread = _PythonThread()
        self._thread.setObjectName(name)
        self._worker = _Worker(expected)
        self._worker.moveToThread(self._thread)
        self._thread.finished.connect(self._worker.deleteLater)
        queued = Qt.ConnectionType.QueuedConnection
        self._submit.connect(self._worker.run, queued)
        self._worker.succeeded.connect(self._on_succeeded, queued)
        self._worker.failed.connect(self._on_failed, queued)
        self._worker.progress.connect(self._on_progress, queued)
        self._thread.start()
        # Destroying a running QThread aborts the process. When our owner (a dialog, a panel)
        # is deleted, stop the thread first; the closure keeps the QThread alive until then.
        thread = self._thread
        self.destroyed.connect(lambda *_: _stop(thread))
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)

    def submit(self, fn: Callable[[Report], Any], on_success: Callable[[Any], None] | None = None,
               on_failure: Callable[[Exception], None] | None = None,
               on_progress: Callable[[float, str], None] | None = None) -> int:
        task_id = next(self._ids)
        self._callbacks[task_id] = (on_success, on_failure, on_progress)
        self._submit.emit(task_id, fn)
        return task_id

    def busy(self) -> bool:
        """True while a submitted task has not reported back."""
        return bool(self._callbacks)

    def shutdown(self) -> None:
        """Stop after the running task (cancel it first if it can be cancelled)."""
        _stop(self._thread)
        self._callbacks.clear()

    @Slot(int, object)
    def _on_succeeded(self, task_id: int, result: Any) -> None:
        on_success = self._callbacks.pop(task_id, (None, None, None))[0]
        if on_success is not None:
            on_success(result)

    @Slot(int, object)
    def _on_failed(self, task_id: int, exc: Exception) -> None:
        on_failure = self._callbacks.pop(task_id, (None, None, None))[1]
        if on_failure is not None:
            on_failure(exc)

    @Slot(int, float, str)
    def _on_progress(self, task_id: int, fraction: float, message: str) -> None:
        on_progress = self._callbacks.get(task_id, (None, None, None))[2]
        if on_progress is not None:
            on_progress(fraction, message)
