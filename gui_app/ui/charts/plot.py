"""Shared pieces of the live charts: the chart base (throttled, palette-aware, given the run's
history), plot and curve styling and the per-replica colours. The numbers a chart draws live in
the run's history (gui_app.core.history); the redraw timer is :mod:`.throttle`.

The rule every chart follows (docs/architecture.md, "Process model"): a batch of events is
folded into numpy buffers once, by the history, which tells its charts what changed; a chart
then only asks for a redraw, and a single-shot QTimer calls ``setData`` at most 30 times a
second, and only when something changed. Curves are created once, use 1-px pens, peak
downsampling and clip-to-view, so 100,000 points draw about as fast as 1,000.
"""
from __future__ import annotations

import os

import numpy as np

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

from PySide6.QtCore import QEvent
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QGraphicsItem, QWidget

import pyqtgraph as pg

from gui_app.ui.charts.throttle import RedrawThrottle

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

    def flush_pending(self) -> None:
        """:meth:`flush` if a redraw is waiting (for its timer, or for the chart to be shown)."""
        if self._throttle.pending() or self._stale:
            self.flush()

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


class IntegerAxis(pg.AxisItem):
    """An axis of whole things (trials, epochs): ticks on integers only, never 0.5 or 2.5."""

    def tickSpacing(self, minVal, maxVal, size):  # noqa: N802, N803 (pyqtgraph's names)
        levels = [(spacing, offset) for spacing, offset in super().tickSpacing(minVal, maxVal, size) if spacing >= 1]
        return levels or [(1.0, 0.0)]


class LazyMenuView(pg.ViewBox):
    """A plot's view whose right-click menu is built on the first right-click. pyqtgraph builds
    it with the view (two axis panels of check boxes and fields: 10 ms a plot, a third of a
    plot's cost), for 12 plots while the window starts, and nearly nobody opens it; those
    widgets were also most of what a closed window left to the garbage collector."""

    def __init__(self) -> None:
        super().__init__(enableMenu=False)  # nothing built yet
        self.state["enableMenu"] = True  # but the menu is on

    def getMenu(self, ev):  # noqa: N802 (pyqtgraph's name)
        if self.menu is None:
            self._applyMenuEnabled()  # pyqtgraph's own way to build it when it is switched on
        return self.menu

    def getContextMenus(self, event):  # noqa: N802 (pyqtgraph's name)
        return self.getMenu(event).actions() if self.menuEnabled() else []


def make_plot(title: str, x_label: str, y_label: str, y_units: str | None = None,
              legend: str | None = "top", axis_items: dict[str, pg.AxisItem] | None = None) -> pg.PlotItem:
    """A PlotItem set up for live data: grid, peak downsampling, clip-to-view and a legend in
    the top or bottom right corner (where the curves are not, for falling or rising data)."""
    plot = pg.PlotItem(title=title, axisItems=axis_items, viewBox=LazyMenuView())
    plot.setLabel("bottom", x_label)
    plot.setLabel("left", y_label, units=y_units)
    plot.showGrid(x=True, y=True, alpha=0.2)
    plot.setDownsampling(auto=True, mode="peak")
    plot.setClipToView(True)
    if legend:
        plot.addLegend(offset=(-8, 8 if legend == "top" else -8), labelTextSize="8pt", verSpacing=-6)
    # Axes, title and legend are mostly text, and text is what a software paint spends its
    # time on (replaying the axes' pictures was half of a 100k-point redraw): cache each as a
    # pixmap, redrawn only when it changes (new ticks, a palette change).
    cached = [plot.getAxis(name) for name in ("left", "bottom", "right", "top")] + [plot.titleLabel]
    if plot.legend is not None:
        cached.append(plot.legend)
    for item in cached:
        item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
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


def decimate(x: np.ndarray, y: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Min/max per bin of consecutive points (x increasing): 2 points per bin, so every peak
    of a curve drawn ``bins`` pixels wide survives. Shorter inputs come back as they are."""
    n = len(x)
    if bins < 1 or n <= 4 * bins:
        return x, y
    k = n // bins
    m = k * bins
    blocks = y[:m].reshape(bins, k)
    xs = x[:m].reshape(bins, k)
    # fmin/fmax skip NaN (a step without a value) unless the whole bin is NaN.
    out_y = np.column_stack((np.fmin.reduce(blocks, axis=1), np.fmax.reduce(blocks, axis=1))).ravel()
    out_x = np.column_stack((xs[:, 0], xs[:, -1])).ravel()
    return np.concatenate((out_x, x[m:])), np.concatenate((out_y, y[m:]))


def set_line_data(curve: pg.PlotDataItem, x: np.ndarray, y: np.ndarray) -> None:
    """``setData`` for a dense live curve: only what the view shows (its x range, unless it
    follows the data), min/max-decimated to the plot's pixel width, so a redraw costs the
    same at 100,000 points as at 2,000 (pyqtgraph's own clip-to-view and peak downsampling
    redo that work over every point at every paint)."""
    view = curve.getViewBox()
    width = int(view.width()) if view is not None and view.width() >= 1 else 1000
    span = getattr(view, "run_span", None)
    if span is not None and len(x) and x[-1] > span:  # more steps than planned: follow the data
        view.run_span = None
        view.enableAutoRange(x=True)
    if view is not None and not view.state["autoRange"][0] and len(x) > 4 * width:
        lo, hi = view.viewRange()[0]
        first = max(int(np.searchsorted(x, lo)) - 1, 0)
        last = min(int(np.searchsorted(x, hi, side="right")) + 1, len(x))
        x, y = x[first:last], y[first:last]
    x, y = decimate(x, y, width)
    curve.setData(x, y, skipFiniteCheck=True)


def redraw_on_zoom(panel: "ChartPanel", plot: pg.PlotItem) -> None:
    """Ask ``panel`` for a redraw when the user pans or zooms ``plot`` (the decimated curves
    of :func:`set_line_data` hold only what the last view showed)."""
    view = plot.getViewBox()

    def changed(*_):
        if not view.state["autoRange"][0]:
            panel.request_redraw()

    view.sigXRangeChanged.connect(changed)


def span_run(plots, total_steps: int) -> None:
    """When a run starts, show its planned steps on the x axis of these live line plots. Their
    x axes then stay as they are for the whole run; following the growing curves instead
    redrew them (mostly text, the costliest part of a software paint) at every redraw. The
    user can still zoom; ``follow_data`` undoes this for a new run."""
    if total_steps > 0:
        for plot in plots:
            plot.setXRange(0, total_steps, padding=0.02)  # also turns the x auto-range off
            plot.getViewBox().run_span = total_steps


def follow_data(plots) -> None:
    """Both axes follow the data again: a new run, or another run opened, shows everything,
    whatever the user zoomed to before."""
    for plot in plots:
        plot.getViewBox().run_span = None
        plot.enableAutoRange()


def _nice_ceiling(value: float) -> float:
    exponent = 10.0 ** np.floor(np.log10(value))
    for step in (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0):
        if step * exponent >= value:
            return float(step * exponent)
    return float(10.0 * exponent)


def hold_top(plot: pg.PlotItem, peak: float) -> None:
    """y from 0 to a round number above ``peak``, changed only when ``peak`` goes above it or
    below a third of it. A bar chart of live speeds rescaled at every redraw redrew its y axis
    every time (6.8 ms each, the costliest axis of the Replicas tab)."""
    if not (np.isfinite(peak) and peak > 0):
        return
    view = plot.getViewBox()
    top = getattr(view, "held_top", None)
    if top is None or peak > top or peak < top / 3:
        view.held_top = _nice_ceiling(1.15 * peak)
        plot.setYRange(0, view.held_top, padding=0)
