"""GpuPanel (Replicas tab): each NVIDIA GPU's utilisation, memory, temperature and power as
the engine's NVML sampler saw them (the ``gpus`` list of ``step`` events, see
gui_app/core/gpu_monitor.py and docs/events.md), the replicas running on it, and a small line
of utilisation over the steps. Hidden unless the events carry ``gpus``: a run on CPUs, or on
a machine without an NVIDIA driver, shows nothing new.

The numbers are the run history's ``gpus`` (gui_app.core.history.gpus: the latest sample per
GPU, utilisation per step, which replica runs where). The panel redraws through the charts'
throttle like every chart, so it costs nothing while the tab is hidden. Written against a fake
NVML: the sampling path has not run on a real GPU here.
"""
from __future__ import annotations

import html
import math

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

import pyqtgraph as pg

from gui_app.core.gpu_monitor import GpuSample
from gui_app.core.history import Part
from gui_app.core.history.buffers import number
from gui_app.ui.charts.canvas import ChartCanvas
from gui_app.ui.charts.plot import (
    HIGHLIGHT_COLOR,
    ChartPanel,
    make_curve,
    make_plot,
    replica_color,
    set_line_data,
    style_plot,
    theme_colors,
)
from gui_app.ui.charts.run_view import RunView

GIB = 1024.0 ** 3
HOT_CELSIUS = 85.0  # most data-centre and consumer cards start to slow their clocks near here
FULL_SHARE = 0.95  # memory this full leaves no room for a larger batch, and may already spill


def describe(sample: GpuSample, replicas: list[int], placed: bool, colour: str = "") -> str:
    """The two lines of one GPU (rich text): who runs on it, then its figures; a hot or
    nearly full card is named in the highlight colour. ``colour``: its line's, on its name."""
    index, name = sample.index, sample.name or "GPU"
    if replicas:
        where = ("replica " if len(replicas) == 1 else "replicas ") + ", ".join(str(r) for r in replicas)
    else:
        where = "no replica of this run" if placed else "replicas not placed"
    parts = []
    busy = number(sample.utilization)
    parts.append(f"{busy:.0f} % busy" if not math.isnan(busy) else "busy: n/a")
    used, total = number(sample.memory_used), number(sample.memory_total)
    if not math.isnan(used) and not math.isnan(total) and total > 0:
        text = f"memory {used / GIB:.1f} / {total / GIB:.1f} GiB ({used / total:.0%})"
        parts.append(_alarm(text + ", nearly full") if used / total >= FULL_SHARE else text)
    else:
        parts.append("memory: n/a")
    celsius = number(sample.temperature)
    if math.isnan(celsius):
        parts.append("temperature: n/a")
    else:
        parts.append(_alarm(f"{celsius:.0f} °C, hot") if celsius >= HOT_CELSIUS else f"{celsius:.0f} °C")
    watts = number(sample.power)
    parts.append(f"{watts:.0f} W" if not math.isnan(watts) else "power: n/a")
    heading = f"<b style='color:{colour}'>GPU {index}</b>" if colour else f"<b>GPU {index}</b>"
    return f"{heading} · {html.escape(str(name), quote=False)} · {where}<br>" + " · ".join(parts)


def _alarm(text: str) -> str:
    return f"<b style='color:{HIGHLIGHT_COLOR}'>{text}</b>"


TOOLTIP = ("From NVML (the nvidia-ml-py package), sampled about once a second by the engine off its training "
           "thread. Busy: the share of the last sample period a kernel ran. Memory: the whole card's, every "
           "process included (the memory chart shows what TensorFlow itself holds). Replica placement reads "
           "TensorFlow's GPU:N as NVML's GPU N; CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER can renumber them.")
CHIEF_NOTE = (" In a multi-worker run only the chief streams events: these are the GPUs of the chief's machine, "
              "and the other workers' GPUs are not shown.")


class GpuPanel(ChartPanel, RunView):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.cards: list[QLabel] = []  # one per GPU, in the order of the history's gpus.indices
        self._curves: list[pg.PlotDataItem] = []
        self._drawn: tuple | None = None  # what the colours and the tooltip were made for
        self._colours: list[str] = []
        self._cards = QVBoxLayout()
        self._cards.setContentsMargins(8, 0, 8, 0)
        self._cards.setSpacing(4)
        self._graphics: ChartCanvas = ChartCanvas()  # narrows the base class's "set by the subclass"
        self._graphics.setFixedHeight(130)  # compact: the replica charts keep the room
        # No title, x label or legend in so little height: each card's GPU name has its line's colour.
        self.util_plot = make_plot("", "", "busy (%)", legend=None)
        self.util_plot.setTitle(None)  # an empty title still takes its row
        self.util_plot.setYRange(0, 100, padding=0.02)
        self.util_plot.setMouseEnabled(x=False, y=False)
        self._graphics.addItem(self.util_plot)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(self._cards, 3)
        layout.addWidget(self._graphics, 2)
        self.setToolTip(TOOLTIP)
        self._apply_palette()
        self.setVisible(False)  # until a step carries GPU samples

    # --- drawing ----------------------------------------------------------------------
    def _history_replaced(self) -> None:
        """The next run may have other GPUs: the cards and lines go."""
        for curve in self._curves:
            self.util_plot.removeItem(curve)
        for label in self.cards:
            label.deleteLater()
        self._curves, self.cards, self._drawn = [], [], None

    def _history_changed(self, changed: int) -> None:
        if changed & Part.GPUS:
            self.setVisible(bool(self.history.gpus.indices))
            self.request_redraw()

    def _redraw(self) -> None:
        series = self.history.gpus
        placement, multi_process = series.placement(), series.multi_process()
        for _index in series.indices[len(self._curves):]:  # one card and one line per GPU, made once
            label = QLabel(textFormat=Qt.TextFormat.RichText)
            self._cards.addWidget(label)
            self.cards.append(label)
            self._curves.append(make_curve(self.util_plot, "#4e79a7"))
        drawn = (list(series.indices), placement, len(series.replicas), multi_process)
        if drawn != self._drawn:  # colours and the tooltip change only with the GPUs or the replicas
            self._drawn = drawn
            self.setToolTip(TOOLTIP + (CHIEF_NOTE if multi_process else ""))
            self._colours = []
            for i, index in enumerate(series.indices):
                replicas = placement.get(index, [])
                # The GPU's line takes the colour of the (first) replica on it, as in the other charts.
                colour = replica_color(replicas[0] if replicas else len(series.replicas) + i)
                self._curves[i].setPen(pg.mkPen(colour, width=1))
                self._colours.append(colour.name())
        steps = series.steps.column(0)
        for i, index in enumerate(series.indices):
            self.cards[i].setText(describe(series.latest[index], placement.get(index, []), bool(series.replicas),
                                             self._colours[i]))
            set_line_data(self._curves[i], steps, series.utilization.data[:, i])

    def _apply_palette(self) -> None:
        background, foreground = theme_colors(self)
        self._graphics.setBackground(background)
        style_plot(self.util_plot, foreground, background)
