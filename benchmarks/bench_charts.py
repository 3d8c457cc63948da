"""Redraw cost of the live charts with 1k and 100k points (design.md: it must stay smooth).

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_charts.py

One redraw = the timer's ``setData`` on every curve plus painting the widget (``grab``), the
work the GUI thread does at most 30 times a second (less when it gets expensive: see
``gui_app.ui.charts.throttle.RedrawThrottle``). Both widgets are measured at 1,000x600;
the ratio 100k/1k shows what peak downsampling and clip-to-view buy (without them it grows
about linearly with the points).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ui"))

from PySide6.QtWidgets import QApplication  # noqa: E402

from synthetic import synthetic_events  # noqa: E402  (tests/ui/synthetic.py)
from gui_app.ui.tabs.replicas import ReplicaCharts  # noqa: E402
from gui_app.ui.tabs.training import TrainingCharts  # noqa: E402

REPEATS = 15


def redraw_ms(widget_type, points: int, events_cache: dict) -> tuple[float, float]:
    """Fastest of REPEATS (ms): ``setData`` alone, and ``setData`` + paint, once ``points``
    steps are buffered. The minimum, not the mean: the machine is shared, noise only adds."""
    events = events_cache.setdefault(points, synthetic_events(steps=points, epochs=10, replicas=2))
    widget = widget_type()
    widget.resize(1000, 600)
    widget.show()
    widget.add_events(events)
    widget.flush()
    widget.grab()  # first paint: layout, fonts
    set_data, total = [], []
    for _ in range(REPEATS):
        started = time.perf_counter()
        widget.flush()
        set_data.append(1000 * (time.perf_counter() - started))
        widget.grab()
        total.append(1000 * (time.perf_counter() - started))
    widget.close()
    widget.deleteLater()
    return min(set_data), min(total)


def main() -> None:
    app = QApplication.instance() or QApplication([])
    cache: dict = {}
    print(f"{'widget':16} {'what':16} {'1k ms':>7} {'100k ms':>8} {'ratio':>6}")
    for widget_type in (TrainingCharts, ReplicaCharts):
        small, large = redraw_ms(widget_type, 1_000, cache), redraw_ms(widget_type, 100_000, cache)
        for i, what in enumerate(("setData", "setData + paint")):
            print(f"{widget_type.__name__:16} {what:16} {small[i]:7.1f} {large[i]:8.1f} {large[i] / small[i]:6.1f}")
    app.processEvents()


if __name__ == "__main__":
    main()
