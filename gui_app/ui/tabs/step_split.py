"""StepSplitPanel (Replicas tab): where each step's time goes -- per replica, its own forward
and backward pass, the wait for input, and the rest of the step (waiting for the slower
replicas, the all-reduce, the optimizer) -- as a stacked bar per replica over the last steps
and a line of the three shares over the run, with the bottleneck named when one part
dominates (gui_app.core.scaling.step_time_split and bottleneck).
"""
from __future__ import annotations

from collections import deque
from typing import Iterable

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

import numpy as np
import pyqtgraph as pg

from gui_app.core.scaling import bottleneck, step_time_split
from gui_app.ui.charts.plot import (
    ChartPanel,
    make_curve,
    make_plot,
    replica_color,
    set_line_data,
    style_plot,
    theme_colors,
)
from gui_app.ui.charts.series import GrowableArray

WINDOW = 50  # steps in the bars and the label
INPUT_COLOR, REST_COLOR = "#bab0ac", "#edc948"
PARTS = ("compute", "input", "all-reduce, optimizer, waiting")


class StepSplit:
    """The numbers behind the panel (Qt-free): recent steps' per-replica split, and the run's
    share of each part per step."""

    def __init__(self, window: int = WINDOW) -> None:
        self._recent: deque[tuple[float, float, list[float]]] = deque(maxlen=window)  # wall, input, computes
        self._splits: deque[tuple[float, float, float]] = deque(maxlen=window)
        self.history = GrowableArray(4)  # step, compute, input, rest shares of the slowest replica's step

    def clear(self) -> None:
        self._recent.clear()
        self._splits.clear()
        self.history.clear()

    def add(self, event: dict) -> bool:
        split = step_time_split(event) if event.get("type") == "step" else None
        if split is None:
            return False
        wall = float(event["step_time"])
        computes = [float(r.get("step_time") or 0.0) for r in event.get("replicas") or []]
        self._recent.append((wall, split[1], computes))
        self._splits.append(split)
        if wall > 0:
            self.history.append([float(event.get("step", len(self.history) + 1)), *(s / wall for s in split)])
        return True

    def shares(self) -> tuple[float, float, float] | None:
        """(compute, input, the rest) as fractions of the recent steps' time (slowest replica)."""
        total = sum(sum(s) for s in self._splits)
        if total <= 0:
            return None
        return tuple(sum(s[i] for s in self._splits) / total for i in range(3))  # type: ignore[return-value]

    def per_replica(self) -> np.ndarray:
        """``[replicas, 3]`` mean seconds per step: own compute, input wait, the rest of the step."""
        replicas = min((len(c) for _, _, c in self._recent), default=0)
        if not replicas:
            return np.zeros((0, 3))
        rows = np.array([[[c[r], waited, max(wall - c[r] - waited, 0.0)] for r in range(replicas)]
                         for wall, waited, c in self._recent])
        return rows.mean(axis=0)

    def steps(self) -> int:
        return len(self._splits)


class StepSplitPanel(ChartPanel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.split = StepSplit()
        self._replicas = 1
        self.label = QLabel(wordWrap=True)
        self.label.setContentsMargins(8, 0, 8, 0)
        self._graphics = pg.GraphicsLayoutWidget()
        self._graphics.setFixedHeight(200)  # the loss, gradient and speed charts keep the room
        self.bars_plot = make_plot(f"Each replica's step (mean of the last {WINDOW} steps)", "replica", "time",
                                   y_units="s", legend=None)
        self.share_plot = make_plot("Share of each step", "step", "share of the step", legend="top")
        self.share_plot.setYRange(0, 1, padding=0.02)
        self._bars = [pg.BarGraphItem(x=[], height=[], width=0.6) for _ in PARTS]
        for bars in self._bars:
            self.bars_plot.addItem(bars)
        self._lines = [make_curve(self.share_plot, color, name) for color, name in
                       zip(("#4e79a7", INPUT_COLOR, REST_COLOR), PARTS)]
        self._graphics.addItem(self.bars_plot, row=0, col=0)
        self._graphics.addItem(self.share_plot, row=0, col=1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        layout.addWidget(self._graphics)
        self._apply_palette()
        self.setVisible(False)  # until a run reports step timings

    def reset(self) -> None:
        self.split.clear()
        self.setVisible(False)
        self.flush()

    def shares(self) -> tuple[float, float, float] | None:
        return self.split.shares()

    def text(self) -> str:
        return self.label.text()

    def add_events(self, events: Iterable[dict]) -> None:
        changed = False
        for event in events:
            if event.get("type") == "run_started":
                if not event.get("resumed"):
                    self.split.clear()
                self._replicas = int(event.get("num_replicas") or 1)
            else:
                changed = self.split.add(event) or changed
        if changed:
            self._show_text()
            self.setVisible(True)
            self.request_redraw()

    def _show_text(self) -> None:
        compute, waited, rest = self.split.shares() or (0.0, 0.0, 0.0)
        text = (f"Where each step's time goes (last {self.split.steps()} steps): compute {compute:.0%} · "
                f"input {waited:.0%} · all-reduce and optimizer {rest:.0%}")
        advice = bottleneck(compute, waited, rest, self._replicas)
        self.label.setText(text + (f". <b>{advice[0].upper() + advice[1:]}</b>." if advice else ""))

    def _redraw(self) -> None:
        rows = self.split.per_replica()
        x = np.arange(len(rows))
        base = np.zeros(len(rows))
        colours = [[replica_color(r) for r in range(len(rows))], [pg.mkColor(INPUT_COLOR)] * len(rows),
                   [pg.mkColor(REST_COLOR)] * len(rows)]
        for i, bars in enumerate(self._bars):
            if len(rows):
                bars.setOpts(x=x, y0=base.copy(), height=rows[:, i], brushes=colours[i],
                             pens=[pg.mkPen(c.darker(130)) for c in colours[i]])
                base += rows[:, i]
            else:  # pyqtgraph 0.14 fails on empty pen lists
                bars.setOpts(x=[], y0=None, height=[], pens=None, brushes=None)
        self.bars_plot.getAxis("bottom").setTicks([[(r, str(r)) for r in range(len(rows))]])
        data = self.split.history.data
        for i, line in enumerate(self._lines):
            set_line_data(line, data[:, 0], data[:, i + 1])

    def _apply_palette(self) -> None:
        background, foreground = theme_colors(self)
        self._graphics.setBackground(background)
        for plot in (self.bars_plot, self.share_plot):
            style_plot(plot, foreground, background)
