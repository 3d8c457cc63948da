"""TaskThread: tasks run in order on one background thread that keeps its Python thread state."""
from __future__ import annotations

import threading

import pytest

from gui_app.ui.workers.task_thread import TaskThread


@pytest.fixture
def tasks(qapp):
    thread = TaskThread("test-tasks")
    yield thread
    thread.shutdown()


def test_thread_local_data_survives_between_tasks(qtbot, tasks):
    # TensorFlow keeps its eager context in threading.local: a plain QThread dropped it between
    # tasks, and predicting after loading a model segfaulted.
    local = threading.local()

    def first(report):
        local.value = 42
        return threading.get_ident()

    with qtbot.waitSignal(tasks._worker.succeeded, timeout=5000) as got:
        tasks.submit(first)
    with qtbot.waitSignal(tasks._worker.succeeded, timeout=5000) as again:
        tasks.submit(lambda report: (getattr(local, "value", None), threading.get_ident()))
    assert again.args[1] == (42, got.args[1])
    assert got.args[1] != threading.get_ident()  # and none of it ran on the GUI thread


def test_failures_and_progress_come_back_on_the_gui_thread(qtbot, tasks):
    seen = []

    def task(report):
        report(0.5, "half")
        raise ValueError("bad input")

    done = []
    tasks.submit(task, on_failure=lambda exc: done.append((str(exc), threading.get_ident())),
                 on_progress=lambda fraction, message: seen.append((fraction, message)))
    qtbot.waitUntil(lambda: bool(done), timeout=5000)
    assert done == [("bad input", threading.get_ident())] and seen == [(0.5, "half")]
    assert not tasks.busy()
