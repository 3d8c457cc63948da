"""Shared pieces of the live charts: growable numpy buffers, EMA smoothing, throttled
redraws, palette-aware plot styling and the per-replica colours.

The rule every chart follows (design.md section 2): ``add_events`` only appends to numpy
buffers and asks for a redraw; a single-shot QTimer then calls ``setData`` at most 30 times
a second, and only when something changed. Curves are created once, use 1-px pens, peak
downsampling and clip-to-view, so 100,000 points draw about as fast as 1,000.
"""
from __future__ import annotations

import math
import os
import time
from typing import Any, Callable

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

from PySide6.QtCore import QEvent, QObject, QTimer  # noqa: E402  (PySide6 before pyqtgraph)
from PySide6.QtGui import QColor, QPalette  # noqa: E402
from PySide6.QtWidgets import QWidget  # noqa: E402

import numpy as np  # noqa: E402
import pyqtgraph as pg  # noqa: E402

REDRAW_INTERVAL_MS = 33  # <= 30 redraws per second

# Tableau-10 tones read on white and on near-black backgrounds alike. Red is kept out of the
# replica colours: it is reserved for highlighting (the slowest replica).
REPLICA_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                  "#edc948", "#9c755f", "#ff9da7", "#bab0ac")
HIGHLIGHT_COLOR = "#e15759"
TRAIN_COLOR = "#4e79a7"
VALIDATION_COLOR = "#f28e2b"
OVERLAY_COLOR = "#b07aa1"


def replica_color(index: int) -> QColor:
    """The colour of replica ``index``, the same in every chart."""
    if index < len(REPLICA_COLORS):
        return QColor(REPLICA_COLORS[index])
    return pg.intColor(index, hues=13, values=1, maxValue=220, sat=180)


def number(value: Any) -> float:
    """A JSON number as float; ``null``, non-numbers and infinities become NaN."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)
        return value if math.isfinite(value) else math.nan
    return math.nan


class GrowableArray:
    """Rows of floats in a numpy array that doubles its capacity when full.

    Appending is amortised O(1); ``data`` is a view of the filled rows, cheap to hand to
    ``setData`` (pyqtgraph copies what it needs).
    """

    def __init__(self, columns: int, capacity: int = 1024) -> None:
        self._buf = np.full((max(capacity, 1), columns), np.nan)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def columns(self) -> int:
        return self._buf.shape[1]

    @property
    def data(self) -> np.ndarray:
        return self._buf[: self._n]

    def column(self, index: int) -> np.ndarray:
        return self._buf[: self._n, index]

    def last(self, index: int) -> float:
        return float(self._buf[self._n - 1, index]) if self._n else math.nan

    def append(self, row) -> None:
        if self._n == len(self._buf):
            self._reserve(2 * len(self._buf))
        self._buf[self._n] = row
        self._n += 1

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` rows."""
        self._n = max(0, min(n, self._n))
        self._buf[self._n:] = np.nan

    def clear(self) -> None:
        self.truncate(0)

    def set_columns(self, columns: int) -> None:
        """Widen (NaN-padded) or narrow the buffer, keeping its rows."""
        if columns == self.columns:
            return
        buf = np.full((len(self._buf), columns), np.nan)
        keep = min(columns, self.columns)
        buf[:, :keep] = self._buf[:, :keep]
        self._buf = buf

    def _reserve(self, capacity: int) -> None:
        buf = np.full((capacity, self.columns), np.nan)
        buf[: self._n] = self._buf[: self._n]
        self._buf = buf


class Ema:
    """TensorBoard's debiased exponential moving average.

    ``smoothing`` is the weight of the history (0 = no smoothing). Dividing by
    ``1 - smoothing**n`` removes the pull towards zero at the start. Non-finite inputs are
    skipped: the output repeats the last smoothed value.
    """

    def __init__(self, smoothing: float = 0.9) -> None:
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing: must be in [0, 1); got {smoothing}")
        self.smoothing = smoothing
        self.reset()

    def reset(self) -> None:
        self._biased = 0.0
        self._count = 0
        self._last = math.nan

    def update(self, value: float) -> float:
        if math.isfinite(value):
            w = self.smoothing
            self._biased = self._biased * w + (1.0 - w) * value
            self._count += 1
            self._last = self._biased / (1.0 - w ** self._count)
        return self._last


def ema(values: np.ndarray, smoothing: float) -> np.ndarray:
    """The debiased EMA of a whole series (see :class:`Ema`)."""
    state = Ema(smoothing)
    return np.fromiter((state.update(v) for v in np.asarray(values, dtype=float).tolist()),
                       dtype=float, count=len(values))


class RedrawThrottle(QObject):
    """Calls ``redraw`` once after ``request``, at most every ``REDRAW_INTERVAL_MS``.

    When a redraw gets expensive (very long runs, software rendering) the interval grows to
    three times its measured cost (capped at 1 s), so ``setData`` never takes more than a
    third of the GUI thread, whatever the event rate.
    """

    def __init__(self, redraw: Callable[[], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._redraw = redraw
        self._dirty = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REDRAW_INTERVAL_MS)
        self._timer.timeout.connect(self._on_timeout)

    @property
    def pending(self) -> bool:
        return self._dirty

    @property
    def interval_ms(self) -> int:
        return self._timer.interval()

    def request(self) -> None:
        self._dirty = True
        if not self._timer.isActive():
            self._timer.start()

    def cancel(self) -> None:
        self._timer.stop()
        self._dirty = False

    def _on_timeout(self) -> None:
        if self._dirty:
            self._dirty = False
            started = time.perf_counter()
            self._redraw()
            cost_ms = 1000.0 * (time.perf_counter() - started)
            self._timer.setInterval(max(REDRAW_INTERVAL_MS, min(1000, int(3 * cost_ms))))


class ChartPanel(QWidget):
    """Base of the chart widgets: a redraw throttle that skips hidden widgets, and plot
    colours that follow the application palette (light or dark) when it changes."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._throttle = RedrawThrottle(self._on_redraw_timer, self)
        self._stale = False  # a redraw was skipped while hidden
        self._graphics: pg.GraphicsLayoutWidget | None = None  # set by the subclass

    def request_redraw(self) -> None:
        self._throttle.request()

    def flush(self) -> None:
        """Push buffered points into the curves now (tests, benchmarks, screenshots)."""
        self._throttle.cancel()
        self._stale = False
        self._redraw()

    def _on_redraw_timer(self) -> None:
        # A chart in a hidden tab costs nothing: it is redrawn when it is shown.
        if self.isVisible():
            self._redraw()
        else:
            self._stale = True

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if self._stale:
            self._stale = False
            self._throttle.request()

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._graphics is not None:
            self._apply_palette()

    def _redraw(self) -> None:
        raise NotImplementedError

    def _apply_palette(self) -> None:
        raise NotImplementedError


def theme_colors(widget: QWidget) -> tuple[QColor, QColor]:
    """(background, foreground) for plots inside ``widget``, from its palette."""
    palette = widget.palette()
    return palette.color(QPalette.ColorRole.Base), palette.color(QPalette.ColorRole.Text)


def style_plot(plot: pg.PlotItem, foreground: QColor, background: QColor) -> None:
    """Axis, title and legend colours for one plot."""
    muted = QColor(foreground)
    muted.setAlpha(150)
    for name in ("left", "bottom", "right", "top"):
        axis = plot.getAxis(name)
        axis.setPen(muted)
        axis.setTextPen(foreground)
    if plot.titleLabel.text:
        plot.setTitle(plot.titleLabel.text, color=foreground)
    legend = plot.legend
    if legend is not None:
        legend.setLabelTextColor(foreground)
        for _, label in legend.items:
            label.setText(label.text)  # setAttr alone does not re-render existing labels
        fill = QColor(background)
        fill.setAlpha(200)
        legend.setBrush(fill)
        legend.setPen(muted)


def compact_number(value: float) -> str:
    """A tick label of three significant digits: 0.001, 0.00025, 1e-5 (never 0.0010000001)."""
    if value == 0:
        return "0"
    text = f"{value:.3g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


class CompactAxis(pg.AxisItem):
    """An axis for small numbers (learning rates): labels like 0.001 or 1e-5, no SI prefix."""

    def __init__(self, orientation: str = "left", **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph override)
        return [compact_number(v * scale) for v in values]


def make_plot(title: str, x_label: str, y_label: str, y_units: str | None = None,
              legend: str | None = "top", axis_items: dict[str, pg.AxisItem] | None = None) -> pg.PlotItem:
    """A PlotItem set up for live data: grid, peak downsampling, clip-to-view and a legend in
    the top or bottom right corner (where the curves are not, for falling or rising data)."""
    plot = pg.PlotItem(title=title, axisItems=axis_items)
    plot.setLabel("bottom", x_label)
    plot.setLabel("left", y_label, units=y_units)
    plot.showGrid(x=True, y=True, alpha=0.2)
    plot.setDownsampling(auto=True, mode="peak")
    plot.setClipToView(True)
    if legend:
        plot.addLegend(offset=(-8, 8 if legend == "top" else -8), labelTextSize="8pt", verSpacing=-6)
    return plot


def make_curve(plot: pg.PlotItem, color: QColor | str, name: str | None = None, *,
               alpha: int = 255, style=None, symbol: str | None = None) -> pg.PlotDataItem:
    """One curve with a 1-px cosmetic pen (2-px pens draw 4-7x slower)."""
    color = QColor(color)
    color.setAlpha(alpha)
    pen = pg.mkPen(color, width=1) if style is None else pg.mkPen(color, width=1, style=style)
    if symbol:
        curve = pg.PlotDataItem(pen=pen, symbol=symbol, symbolSize=7, symbolPen=pg.mkPen(color),
                                symbolBrush=color if style is None else None, name=name)
    else:
        curve = pg.PlotDataItem(pen=pen, name=name)
    plot.addItem(curve)
    return curve


def synthetic_events(steps: int = 600, epochs: int = 3, replicas: int = 2, *, seed: int = 0,
                     lr: float = 0.1, gpu: bool = False, classes: int = 10) -> list[dict]:
    """A plausible run as docs/events.md describes it (previews and benchmarks); replica 1
    is about 15 % slower than the others so there is a slowest replica to show."""
    rng = np.random.default_rng(seed)
    kind = "GPU" if gpu else "CPU"
    devices = [f"/job:localhost/replica:0/task:0/device:{kind}:{i}" for i in range(replicas)]
    per_epoch = max(1, steps // epochs)
    events: list[dict] = [{
        "type": "run_started", "time": 0.0, "resumed": False, "start_step": 0,
        "total_steps": steps, "steps_per_epoch": per_epoch, "epochs": epochs,
        "num_replicas": replicas, "replicas": [{"replica": i, "device": d} for i, d in enumerate(devices)],
        "global_batch_size": 64 * replicas, "per_replica_batch_size": 64,
        "dataset": {"name": "digits", "class_names": [str(c) for c in range(classes)]},
    }]
    for step in range(1, steps + 1):
        progress = step / steps
        loss = 2.3 * math.exp(-4 * progress) + 0.05
        rows = []
        for r in range(replicas):
            step_time = 0.02 * (1.15 if r == 1 else 1.0) * (1 + 0.1 * rng.random())
            rows.append({
                "replica": r, "device": devices[r], "loss": loss * (1 + 0.3 * rng.standard_normal()),
                "accuracy": min(1.0, 1 - loss / 2.5 + 0.05 * rng.standard_normal()), "examples": 64,
                "grad_norm": 3 * loss * (1 + 0.2 * rng.random()), "step_time": step_time,
                "examples_per_sec": 64 / step_time,
                "memory_bytes": int(3e8 + 2e8 * r + 1e7 * rng.random()) if gpu else None,
                "peak_memory_bytes": int(6e8 + 2e8 * r) if gpu else None,
            })
        events.append({
            "type": "step", "time": step * 0.02, "step": step, "epoch": min(epochs, 1 + (step - 1) // per_epoch),
            "loss": float(np.mean([row["loss"] for row in rows])),
            "accuracy": float(np.mean([row["accuracy"] for row in rows])),
            "learning_rate": lr * 0.5 * (1 + math.cos(math.pi * progress)),
            "examples_per_sec": sum(row["examples_per_sec"] for row in rows),
            "step_time": max(row["step_time"] for row in rows), "replicas": rows,
        })
        if step % per_epoch == 0 and step // per_epoch <= epochs:
            events.append({"type": "epoch_end", "time": step * 0.02, "epoch": step // per_epoch,
                           "step": step, "loss": loss, "accuracy": 1 - loss / 2.5,
                           "val_loss": loss * 1.1, "val_accuracy": 1 - loss * 1.1 / 2.5, "duration": 1.0})
    events.append({"type": "run_finished", "time": steps * 0.02, "status": "completed", "step": steps})
    return events


def run_preview(factory: Callable[[], QWidget], events: list[dict] | None = None) -> None:
    """Show one widget on its own, fed ``events`` live (``add_events`` in small batches).

    ``--screenshot PATH`` feeds everything, saves a PNG and exits; ``--dark`` uses a dark
    palette; ``--size WxH`` sets the window size.
    """
    import argparse
    import sys

    from PySide6.QtWidgets import QApplication

    parser = argparse.ArgumentParser()
    parser.add_argument("--screenshot")
    parser.add_argument("--dark", action="store_true")
    parser.add_argument("--size", default="1000x620")
    args = parser.parse_args()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    if args.dark:
        app.setStyle("Fusion")
        app.setPalette(_dark_palette())
    widget = factory()
    width, height = (int(v) for v in args.size.split("x"))
    widget.resize(width, height)
    widget.show()
    events = events or []
    if args.screenshot:
        if events:
            widget.add_events(events)
        app.processEvents()
        if hasattr(widget, "flush"):
            widget.flush()
        app.processEvents()
        widget.grab().save(args.screenshot)
        return
    batches = iter([events[i:i + 20] for i in range(0, len(events), 20)])

    def feed() -> None:
        batch = next(batches, None)
        if batch is None:
            timer.stop()
        else:
            widget.add_events(batch)

    timer = QTimer()
    timer.timeout.connect(feed)
    timer.start(20)
    app.exec()


def _dark_palette() -> QPalette:
    palette = QPalette()
    roles = {QPalette.ColorRole.Window: "#2b2b2b", QPalette.ColorRole.WindowText: "#e6e6e6",
             QPalette.ColorRole.Base: "#1e1e1e", QPalette.ColorRole.AlternateBase: "#2b2b2b",
             QPalette.ColorRole.Text: "#e6e6e6", QPalette.ColorRole.Button: "#353535",
             QPalette.ColorRole.ButtonText: "#e6e6e6", QPalette.ColorRole.Highlight: "#3d6fa8",
             QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.ToolTipBase: "#2b2b2b",
             QPalette.ColorRole.ToolTipText: "#e6e6e6"}
    for role, color in roles.items():
        palette.setColor(role, QColor(color))
    return palette
