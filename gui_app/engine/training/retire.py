"""Drop finished tf.data iterators off the training thread.

Deleting a distributed iterator (MirroredStrategy's ``OwnedMultiDeviceIterator``) blocks the
deleting thread while TensorFlow tears down its per-device prefetch functions and resources.
Measured here (2 logical CPUs, MNIST-shaped epochs of 100 steps, machine shared): the implicit
delete when the next epoch's iterator replaced the last one took 1.2-3.8 s per epoch, as long
as the epoch's training itself, and once 32 s at the end of a run. The training loop does not
need to wait for it: a single daemon thread deletes retired iterators in order, the GIL is
released while TensorFlow waits, and the loop goes on with the next epoch (4 epochs: 14 s ->
6 s of wall time). Only references are handed over; nothing else touches the objects.
"""
from __future__ import annotations

import atexit
import queue
import sys
import threading
import time

_queue: queue.SimpleQueue = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()
_STOP = object()


def _drain() -> None:
    while True:
        item = _queue.get()
        if item is _STOP:
            return
        # Wait (briefly) until the caller has dropped its own reference, so that the last
        # reference, and with it TensorFlow's teardown, is this thread's.
        deadline = time.monotonic() + 5.0
        while sys.getrefcount(item) > 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        del item


def retire(obj) -> None:
    """Delete ``obj`` on the background thread once the caller has dropped its references
    (``retire(it)`` then ``it = None`` or a new value for ``it``)."""
    global _thread
    if obj is None:
        return
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_drain, name="retire-iterators", daemon=True)
            _thread.start()
            atexit.register(drain)
    _queue.put(obj)


def drain(timeout: float = 120.0) -> None:
    """Wait until everything retired so far is deleted (and stop the thread).

    Runs at exit: a daemon thread still inside TensorFlow's C++ teardown when the interpreter
    finalises is unwound by force and aborts the process ("FATAL: exception not rethrown")."""
    global _thread
    with _lock:
        thread, _thread = _thread, None
    if thread is not None:
        _queue.put(_STOP)
        thread.join(timeout)
