"""DevicePanel: the GPUs and CPU of this machine, with tick boxes for a mirrored strategy.

Detection runs ``engine devices --json`` in a background process, so the window never
imports TensorFlow and appears at once; until it answers only the CPU is listed. The
"CPU replicas" box is ``runtime.cpu_devices``: that many logical CPU devices are created in
the engine, so a machine without a GPU can still train with several replicas.
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QGridLayout, QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from gui_app.core.answers import DevicesInfo, reader
from gui_app.core.config import RuntimeConfig
from gui_app.core.wording import label
from gui_app.ui.colors import ERROR_STYLE
from gui_app.ui.workers.engine_job import QUERY_TIMEOUT_S, EngineJob

CPU_COLUMNS = 4


def _device_key(name: str) -> tuple[int, int]:
    kind, _, index = name.partition(":")
    return (0 if kind == "GPU" else 1, int(index) if index.isdigit() else 0)


class DevicePanel(QWidget):
    changed = Signal()  # ticks or runtime settings changed
    detected = Signal(object)  # the devices --json answer (DevicesInfo)
    detection_failed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.info: DevicesInfo | None = None
        self._selected: set[str] = {"CPU:0"}
        self._ticks_enabled = True
        self._job: EngineJob | None = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.status = QLabel("Detecting devices…")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self._gpu_box = QVBoxLayout()
        layout.addLayout(self._gpu_box)
        self.cpu_label = QLabel("CPU")
        self.cpu_label.setWordWrap(True)
        layout.addWidget(self.cpu_label)
        row = QHBoxLayout()
        row.addWidget(QLabel(label("runtime.cpu_devices")))
        self.cpu_devices = QSpinBox(minimum=1, maximum=64)
        self.cpu_devices.setToolTip("Logical CPU devices the engine creates (runtime.cpu_devices); "
                                    "tick several for a mirrored strategy without a GPU")
        self.cpu_devices.valueChanged.connect(self._on_cpu_devices)
        row.addWidget(self.cpu_devices)
        row.addStretch(1)
        layout.addLayout(row)
        self._cpu_grid = QGridLayout()
        layout.addLayout(self._cpu_grid)
        self.memory_growth = QCheckBox(label("runtime.gpu_memory_growth"))
        self.memory_growth.setToolTip("runtime.gpu_memory_growth: otherwise TensorFlow takes all GPU memory")
        self.memory_growth.toggled.connect(lambda _: self.changed.emit())
        layout.addWidget(self.memory_growth)
        self.boxes: dict[str, QCheckBox] = {}  # each device's tick box, by name ("GPU:0", "CPU:1")
        self._rebuild()

    # ---- detection -------------------------------------------------------------------
    def start_detection(self, engine_command: Callable[..., list[str]]) -> None:
        self.status.setText("Detecting devices…")
        self.status.setStyleSheet("")
        self._job = (EngineJob(engine_command("devices", "--json"), name="device detection",
                               timeout_s=QUERY_TIMEOUT_S, read=reader(DevicesInfo), parent=self)
                     .on_result(self._on_detected).on_failure(self._on_failed)
                     .start(replacing=self._job))

    def cancel_detection(self) -> None:
        if self._job is not None:
            self._job.discard()
            self._job = None

    def is_detecting(self) -> bool:
        return self._job is not None and self._job.is_running()

    def _on_detected(self, info: DevicesInfo) -> None:
        self.info = info
        gpus = self.gpu_names()
        dropped = sorted(d for d in self._selected if d.startswith("GPU") and d not in gpus)
        self._selected -= set(dropped)
        self.cpu_label.setText(f"CPU — {info.cpu.describe()}")
        text = f"TensorFlow {info.tensorflow} · "
        text += f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}" if gpus else "no GPU found: training on the CPU"
        if gpus and info.nccl_available:
            text += " · NCCL available"
        if dropped:
            text += f". Not on this machine: {', '.join(dropped)}"
        self.status.setText(text)
        self._rebuild()
        self.detected.emit(info)
        self.changed.emit()

    def _on_failed(self, message: str) -> None:
        self.show_problem(f"Device detection failed: {message}")
        self.detection_failed.emit(message)

    def show_problem(self, text: str) -> None:
        """A line about where the devices are (the Run on host cannot run commands), whole: the
        other places that meet the same failure point here (gui_app/ui/window/main_window.py)."""
        if text not in self.status.text():
            self.status.setText(text)
            self.status.setStyleSheet(ERROR_STYLE)

    # ---- state -----------------------------------------------------------------------
    def gpu_names(self) -> list[str]:
        return [g.name for g in self.info.gpus] if self.info else []

    def available_devices(self) -> list[str]:
        return self.gpu_names() + [f"CPU:{i}" for i in range(self.cpu_devices.value())]

    def selected_devices(self) -> list[str]:
        return sorted(self._selected, key=_device_key)

    def set_selected_devices(self, devices: list[str] | tuple[str, ...]) -> None:
        # GPUs named before detection has answered are kept; detection drops missing ones.
        self._selected = set(devices)
        self._rebuild()
        self.changed.emit()

    def set_ticks_enabled(self, enabled: bool) -> None:
        """Ticks only mean something for a mirrored strategy; disabled, not hidden, otherwise."""
        self._ticks_enabled = enabled
        for box in self.boxes.values():
            box.setEnabled(enabled)

    def config_section(self) -> RuntimeConfig:
        return RuntimeConfig(cpu_devices=self.cpu_devices.value(), gpu_memory_growth=self.memory_growth.isChecked())

    def set_config_section(self, section: RuntimeConfig) -> None:
        self.blockSignals(True)
        try:
            self.cpu_devices.setValue(section.cpu_devices)
            self.memory_growth.setChecked(section.gpu_memory_growth)
        finally:
            self.blockSignals(False)
        self._rebuild()

    # ---- widgets ---------------------------------------------------------------------
    def _on_cpu_devices(self, count: int) -> None:
        self._selected = {d for d in self._selected if not d.startswith("CPU") or _device_key(d)[1] < count}
        self._rebuild()
        self.changed.emit()

    def _rebuild(self) -> None:
        for box in self.boxes.values():
            # Hidden and out of the layout, but never without a parent: a parentless widget is a
            # window, and until its deferred delete ran it showed as a stray "CPU:0" window.
            box.hide()
            self._gpu_box.removeWidget(box)
            self._cpu_grid.removeWidget(box)
            box.deleteLater()
        self.boxes.clear()
        for gpu in self.info.gpus if self.info else []:
            self._gpu_box.addWidget(self._box(gpu.name, f"{gpu.name}  {gpu.describe()}"))
        for i in range(self.cpu_devices.value()):
            name = f"CPU:{i}"
            self._cpu_grid.addWidget(self._box(name, name), i // CPU_COLUMNS, i % CPU_COLUMNS)
        self.memory_growth.setEnabled(bool(self.gpu_names()))

    def _box(self, name: str, text: str) -> QCheckBox:
        box = QCheckBox(text)
        box.setChecked(name in self._selected)
        box.setEnabled(self._ticks_enabled)
        box.toggled.connect(lambda on, n=name: self._on_toggled(n, on))
        self.boxes[name] = box
        return box

    def _on_toggled(self, name: str, on: bool) -> None:
        (self._selected.add if on else self._selected.discard)(name)
        self.changed.emit()
