"""GpuPanel (Replicas tab): each NVIDIA GPU's utilisation, memory, temperature and power as
the engine's NVML sampler saw them (the ``gpus`` list of ``step`` events, see
gui_app/core/gpu_monitor.py and docs/events.md), the replicas running on it, and a small line
of utilisation over the steps. Hidden unless the events carry ``gpus``: a run on CPUs, or on
a machine without an NVIDIA driver, shows nothing new.

``GpuSeries`` is the Qt-free part (latest sample per GPU, utilisation per step);
``gpu_replicas`` maps NVML indices to replicas by their device names. The panel redraws
through the charts' throttle like every chart, so it costs nothing while the tab is hidden.
Written against a fake NVML: the sampling path has not run on a real GPU here.
"""
from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

import numpy as np
import pyqtgraph as pg

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
from gui_app.ui.charts.series import GrowableArray, number

GIB = 1024.0 ** 3
HOT_CELSIUS = 85.0  # most data-centre and consumer cards start to slow their clocks near here
FULL_SHARE = 0.95  # memory this full leaves no room for a larger batch, and may already spill
_TASK = re.compile(r"/task:(\d+)")
MULTI_PROCESS = ("multi_worker_mirrored", "parameter_server")


def gpu_index(device: str) -> int | None:
    """``/job:localhost/replica:0/task:0/device:GPU:1`` -> 1; None for a CPU or another name."""
    short = device.split("device:")[-1] if isinstance(device, str) else ""
    kind, _, index = short.partition(":")
    return int(index) if kind == "GPU" and index.isdigit() else None


def gpu_replicas(replicas: dict[int, tuple[str, int | None]], strategy: str = "") -> dict[int, list[int]]:
    """NVML GPU index -> the replicas whose device is that GPU of the chief's process.

    The samples come from the process that streams the events (the chief, task 0), so only its
    replicas can be placed; under ``parameter_server`` that process runs no replica at all.
    TensorFlow's ``GPU:N`` is taken as NVML's GPU N (true unless CUDA_VISIBLE_DEVICES or
    CUDA_DEVICE_ORDER renumber the cards)."""
    out: dict[int, list[int]] = {}
    if strategy == "parameter_server":
        return out
    for replica, (device, worker) in sorted(replicas.items()):
        task = _TASK.search(device or "")
        if worker is None and task is not None:
            worker = int(task.group(1))
        index = gpu_index(device)
        if index is not None and (worker or 0) == 0:
            out.setdefault(index, []).append(replica)
    return out


class GpuSeries:
    """The GPUs of one run: the latest sample of each (by NVML index) and utilisation per step,
    one column per GPU in the order they were first seen. Steps stay increasing, as in
    ReplicaSeries: a replayed step drops the points after it."""

    def __init__(self) -> None:
        self.steps = GrowableArray(1)
        self.utilization = GrowableArray(0)
        self.indices: list[int] = []
        self.latest: dict[int, dict[str, Any]] = {}

    def clear(self) -> None:
        self.__init__()

    def add(self, event: dict[str, Any]) -> bool:
        samples = event.get("gpus") if event.get("type") == "step" else None
        step = number(event.get("step"))
        if not isinstance(samples, list) or not samples or math.isnan(step):
            return False
        if len(self.steps) and step <= self.steps.last(0):
            n = int(np.searchsorted(self.steps.column(0), step - 1, side="right"))
            self.steps.truncate(n)
            self.utilization.truncate(n)
        for sample in samples:
            index = sample.get("index") if isinstance(sample, dict) else None
            if isinstance(index, int) and not isinstance(index, bool):
                if index not in self.latest:
                    self.indices.append(index)
                self.latest[index] = sample
        self.utilization.set_columns(len(self.indices))
        row = np.full(len(self.indices), np.nan)
        for sample in samples:
            if isinstance(sample, dict) and sample.get("index") in self.latest:
                row[self.indices.index(sample["index"])] = number(sample.get("utilization"))
        self.steps.append((step,))
        self.utilization.append(row)
        return True


def describe(sample: dict[str, Any], replicas: list[int], placed: bool, colour: str = "") -> str:
    """The two lines of one GPU (rich text): who runs on it, then its figures; a hot or
    nearly full card is named in the highlight colour. ``colour``: its line's, on its name."""
    index, name = sample.get("index"), sample.get("name") or "GPU"
    if replicas:
        where = ("replica " if len(replicas) == 1 else "replicas ") + ", ".join(str(r) for r in replicas)
    else:
        where = "no replica of this run" if placed else "replicas not placed"
    parts = []
    busy = number(sample.get("utilization"))
    parts.append(f"{busy:.0f} % busy" if not math.isnan(busy) else "busy: n/a")
    used, total = number(sample.get("memory_used")), number(sample.get("memory_total"))
    if not math.isnan(used) and not math.isnan(total) and total > 0:
        text = f"memory {used / GIB:.1f} / {total / GIB:.1f} GiB ({used / total:.0%})"
        parts.append(_alarm(text + ", nearly full") if used / total >= FULL_SHARE else text)
    else:
        parts.append("memory: n/a")
    celsius = number(sample.get("temperature"))
    if math.isnan(celsius):
        parts.append("temperature: n/a")
    else:
        parts.append(_alarm(f"{celsius:.0f} °C, hot") if celsius >= HOT_CELSIUS else f"{celsius:.0f} °C")
    watts = number(sample.get("power"))
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


class GpuPanel(ChartPanel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.series = GpuSeries()
        self._replicas: dict[int, tuple[str, int | None]] = {}  # replica -> (device, worker)
        self._strategy = ""
        self._labels: list[QLabel] = []
        self._curves: list[pg.PlotDataItem] = []
        self._drawn: tuple | None = None  # what the colours and the tooltip were made for
        self._colours: list[str] = []
        self._cards = QVBoxLayout()
        self._cards.setContentsMargins(8, 0, 8, 0)
        self._cards.setSpacing(4)
        self._graphics = pg.GraphicsLayoutWidget()
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

    # --- public API -------------------------------------------------------------------
    def reset(self) -> None:
        """Empty and hidden; the next run may have other GPUs, so the cards and lines go too."""
        self.series.clear()
        self._replicas.clear()
        self._strategy = ""
        for curve in self._curves:
            self.util_plot.removeItem(curve)
        for label in self._labels:
            label.deleteLater()
        self._curves, self._labels, self._drawn = [], [], None
        self.setVisible(False)

    def add_events(self, events: Iterable[dict]) -> None:
        changed = False
        for event in events:
            kind = event.get("type")
            if kind == "run_started":
                self._learn_replicas(event.get("replicas"))
                strategy = event.get("strategy")
                self._strategy = strategy.get("name", "") if isinstance(strategy, dict) else ""
            elif kind == "step":
                if not self._replicas:  # an opened run written without run_started replicas
                    self._learn_replicas(event.get("replicas"))
                changed = self.series.add(event) or changed
        if changed:
            self.setVisible(True)
            self.request_redraw()

    def gpu_count(self) -> int:
        return len(self.series.indices)

    def card_text(self, index: int) -> str:
        """The shown text of GPU ``index`` (NVML numbering), as rich text; "" until it is drawn."""
        i = self.series.indices.index(index)
        return self._labels[i].text() if i < len(self._labels) else ""

    def placement(self) -> dict[int, list[int]]:
        return gpu_replicas(self._replicas, self._strategy)

    def multi_process(self) -> bool:
        workers = {w for _, w in self._replicas.values() if w is not None}
        return self._strategy in MULTI_PROCESS or len(workers) > 1

    # --- drawing ----------------------------------------------------------------------
    def _learn_replicas(self, entries: Any) -> None:
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("replica"), int):
                worker = entry.get("worker")
                self._replicas[entry["replica"]] = (str(entry.get("device") or ""),
                                                    worker if isinstance(worker, int) else None)

    def _redraw(self) -> None:
        series, placement = self.series, self.placement()
        for _index in series.indices[len(self._curves):]:  # one card and one line per GPU, made once
            label = QLabel(textFormat=Qt.TextFormat.RichText)
            self._cards.addWidget(label)
            self._labels.append(label)
            self._curves.append(make_curve(self.util_plot, "#4e79a7"))
        drawn = (list(series.indices), placement, len(self._replicas), self.multi_process())
        if drawn != self._drawn:  # colours and the tooltip change only with the GPUs or the replicas
            self._drawn = drawn
            self.setToolTip(TOOLTIP + (CHIEF_NOTE if self.multi_process() else ""))
            self._colours = []
            for i, index in enumerate(series.indices):
                replicas = placement.get(index, [])
                # The GPU's line takes the colour of the (first) replica on it, as in the other charts.
                colour = replica_color(replicas[0] if replicas else len(self._replicas) + i)
                self._curves[i].setPen(pg.mkPen(colour, width=1))
                self._colours.append(colour.name())
        steps = series.steps.column(0)
        for i, index in enumerate(series.indices):
            self._labels[i].setText(describe(series.latest[index], placement.get(index, []), bool(self._replicas),
                                             self._colours[i]))
            set_line_data(self._curves[i], steps, series.utilization.data[:, i])

    def _apply_palette(self) -> None:
        background, foreground = theme_colors(self)
        self._graphics.setBackground(background)
        style_plot(self.util_plot, foreground, background)
