"""How long the GUI thread went without running its timers: a test's proof that slow work ran elsewhere."""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from PySide6.QtCore import QTimer


@contextlib.contextmanager
def gui_thread_gaps(interval_ms: int = 20) -> Iterator[list[float]]:
    """Yields the list of seconds between the ticks of a ``interval_ms`` timer on the GUI thread,
    filled while the block runs (a gap far above the interval: the GUI thread was blocked)."""
    gaps: list[float] = []
    last = [time.monotonic()]

    def tick() -> None:
        now = time.monotonic()
        gaps.append(now - last[0])
        last[0] = now

    timer = QTimer(interval=interval_ms)
    timer.timeout.connect(tick)
    timer.start()
    try:
        yield gaps
    finally:
        timer.stop()


def slowed(monkeypatch, owner: object, name: str, seconds: float) -> list[bool]:
    """``owner.name`` made ``seconds`` slower (a loaded machine, a big file); returns, filled as
    it is called, whether each call ran on the GUI thread."""
    on_gui: list[bool] = []
    real = getattr(owner, name)

    def slow(*args, **kwargs):
        on_gui.append(threading.current_thread() is threading.main_thread())
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, slow)
    return on_gui
