"""Redraw cost of the live charts at 1,000, 100,000 and 1,000,000 points per curve.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_charts.py [--quick] [--json OUT]

One redraw = the timer's ``setData`` on every curve (``flush``) plus painting the widget
(``grab``), the work the GUI thread does at most 30 times a second (less when it gets
expensive: see ``gui_app.ui.charts.throttle.RedrawThrottle``). Both chart widgets are
measured at 1,000x600 with synthetic events of two replicas; each figure is the median of
``REPEATS`` redraws (min and max beside it; the machine is shared, so the spread is wide).
Target (issue 11): median <= 16 ms at 100,000 points (one 60 Hz frame); 1,000,000 is
reported. ``set_line_data`` (gui_app/ui/charts/plot.py) clips to the view and min/max-decimates
each curve to the plot's pixel width before ``setData``, so the cost stays nearly flat.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ui"))

import common  # noqa: E402

REPEATS = 15
TARGET_MS = 16.0


def redraw_ms(widget_type, points: int, events_cache: dict, repeats: int) -> tuple[list[float], list[float]]:
    """``setData`` alone and ``setData`` + paint (ms), ``repeats`` times, once ``points`` steps
    are buffered."""
    from synthetic import synthetic_events  # tests/ui/synthetic.py

    events = events_cache.setdefault(points, synthetic_events(steps=points, epochs=10, replicas=2))
    widget = widget_type()
    widget.resize(1000, 600)
    widget.show()
    widget.add_events(events)
    widget.flush()
    widget.grab()  # first paint: layout, fonts
    set_data, total = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        widget.flush()
        set_data.append(1000 * (time.perf_counter() - started))
        widget.grab()
        total.append(1000 * (time.perf_counter() - started))
    widget.close()
    widget.deleteLater()
    return set_data, total


def run(quick: bool = False) -> list[dict]:
    from PySide6.QtWidgets import QApplication

    from gui_app.ui.tabs.replicas import ReplicaCharts
    from gui_app.ui.tabs.training import TrainingCharts

    app = QApplication.instance() or QApplication([])
    cache: dict = {}
    repeats = 7 if quick else REPEATS
    figures = []
    cmd = f"python benchmarks/bench_charts.py{' --quick' if quick else ''}"
    for widget_type in (TrainingCharts, ReplicaCharts):
        for points in (1_000, 100_000, 1_000_000):
            set_data, total = redraw_ms(widget_type, points, cache, repeats)
            target = TARGET_MS if points == 100_000 else None
            figures.append(common.figure(f"{widget_type.__name__} redraw (setData + paint), {points:,} points",
                                         total, target, better="lower", unit="ms", command=cmd,
                                         set_data_ms=statistics.median(set_data)))
    app.processEvents()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    figures = run(args.quick)
    common.show(figures)
    return common.finish(figures, args.json)


if __name__ == "__main__":
    sys.exit(main())
