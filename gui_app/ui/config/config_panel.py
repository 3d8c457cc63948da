"""ConfigPanel: the left column of the window, a form over the whole RunConfig.

It stacks the DevicePanel and the four section forms, keeps them consistent with each
other (ticked devices -> strategy replicas -> batch summary; a GPU -> mixed precision),
validates on every edit and asks the Inspector about the dataset and model. Cross-section
errors from ``RunConfig.__post_init__`` are shown on the form that owns the key they name.
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import QAbstractSpinBox, QApplication, QComboBox, QGroupBox, QScrollArea, QVBoxLayout, QWidget

from gui_app.core.config import ConfigError, RunConfig, RuntimeConfig, StrategyConfig
from gui_app.ui.config import DatasetForm, FormSection, ModelForm, StrategyForm, TrainingForm, split_error
from gui_app.ui.config.device_panel import DevicePanel
from gui_app.ui.tabs.dataset import describe_dataset
from gui_app.ui.workers.inspector import Inspector


def first_launch_config(gpus: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Digits and the small CNN, mirrored over the GPUs, or over two logical CPUs on a machine
    without one, so that two replicas show anywhere."""
    if gpus:
        return RunConfig(strategy=StrategyConfig(name="mirrored", devices=tuple(gpus)))
    return RunConfig(strategy=StrategyConfig(name="mirrored", devices=("CPU:0", "CPU:1")),
                     runtime=RuntimeConfig(cpu_devices=2))


class _WheelGuard(QObject):
    """Gives the wheel of an unfocused field to the form's scroll bar."""

    def __init__(self, scroll_bar: QWidget, parent: QObject) -> None:
        super().__init__(parent)
        self._scroll_bar = scroll_bar

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Wheel and not watched.hasFocus():
            QApplication.sendEvent(self._scroll_bar, event)
            return True
        return False


class ConfigPanel(QScrollArea):
    validity_changed = Signal(bool)
    edited = Signal()  # any change, valid or not (the window remembers the last config)
    inspected = Signal(dict, str)  # inspect answer, samples .npz
    inspect_failed = Signal(str)
    inspect_started = Signal()

    def __init__(self, engine_command: Callable[..., list[str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        column = QVBoxLayout(body)
        self.devices = DevicePanel()
        self.dataset = DatasetForm()
        self.model = ModelForm()
        self.strategy = StrategyForm()
        self.training = TrainingForm()
        for title, widget in (("Devices", self.devices), ("Dataset", self.dataset), ("Model", self.model),
                              ("Strategy", self.strategy), ("Hyperparameters", self.training)):
            box = QGroupBox(title)
            QVBoxLayout(box).addWidget(widget)
            column.addWidget(box)
        column.addStretch(1)
        self.setWidget(body)
        self.setMinimumWidth(body.sizeHint().width() + self.verticalScrollBar().sizeHint().width())
        self._wheel_guard = _WheelGuard(self.verticalScrollBar(), self)
        # Scrolling the form must not change the spin box or list the pointer passes over
        # (it turned 30 epochs into 21): they take the wheel only once clicked into.
        for field in body.findChildren(QAbstractSpinBox) + body.findChildren(QComboBox):
            field.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            field.installEventFilter(self._wheel_guard)
        self.forms: list[FormSection] = [self.dataset, self.model, self.strategy, self.training]

        self._engine_command = engine_command
        self.inspector = Inspector(engine_command, self)
        self.inspector.started.connect(self._on_inspect_started)
        self.inspector.inspected.connect(self._on_inspected)
        self.inspector.failed.connect(self._on_inspect_failed)
        self._config: RunConfig | None = None
        self._valid: bool | None = None
        self._busy = False
        self.prefer_gpus = False  # first launch: once GPUs are detected, mirror over them
        self.devices.changed.connect(self._on_devices_changed)
        self.devices.detected.connect(self._on_devices_detected)
        self.dataset.open_failed.connect(lambda message: self.dataset.set_status(message, error=True))
        for form in self.forms:
            form.changed.connect(self.revalidate)
        self._on_devices_changed()

    # ---- public ----------------------------------------------------------------------
    def config(self) -> RunConfig | None:
        """The RunConfig the forms describe, or None while any field is invalid."""
        return self._config

    def is_valid(self) -> bool:
        return self._config is not None

    def set_config(self, config: RunConfig) -> None:
        self._busy = True
        try:
            self.devices.set_config_section(config.runtime)
            devices = config.strategy.devices
            if config.strategy.name == "mirrored" and not devices:  # "every GPU, else the CPU"
                devices = tuple(self.devices.gpu_names()) or ("CPU:0",)
            self.devices.set_selected_devices(devices)
            for form in self.forms:
                form.set_config_section(getattr(config, form.section))
        finally:
            self._busy = False
        self._on_devices_changed()

    def start_detection(self) -> None:
        self.devices.start_detection(self._engine_command)

    def set_locked(self, locked: bool) -> None:
        """No edits while a run uses this configuration."""
        self.widget().setEnabled(not locked)

    # ---- keeping the sections consistent ---------------------------------------------
    def _on_devices_changed(self) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            self.strategy.set_devices(self.devices.selected_devices(), self.devices.available_devices())
        finally:
            self._busy = False
        self.revalidate()

    def _on_devices_detected(self, info: dict) -> None:
        gpus = self.devices.gpu_names()
        if self.prefer_gpus and gpus:
            default = first_launch_config(gpus)
            self.set_config((self.config() or default).replace(strategy=default.strategy, runtime=default.runtime))
        self.prefer_gpus = False

    def _gpu_in_use(self) -> bool:
        name, gpus = self.strategy.name.currentData(), self.devices.gpu_names()
        if name == "mirrored":
            return any(d.startswith("GPU") for d in self.devices.selected_devices())
        if name == "one_device":
            device = self.strategy.device.currentData()
            return device.startswith("GPU") if device else bool(gpus)
        return bool(gpus)

    def revalidate(self) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            self.devices.set_ticks_enabled(self.strategy.name.currentData() == "mirrored")
            self.strategy.set_global_batch(self.training.global_batch_size.value())
            self.training.set_gpu_selected(self._gpu_in_use())
            self.training.set_strategy(self.strategy.name.currentData())
            sections = {form.section: form.validate() for form in self.forms}
        finally:
            self._busy = False
        config = None
        if all(sections.values()):
            try:
                config = RunConfig(runtime=self.devices.config_section(), **sections)
            except ConfigError as exc:
                key, message = split_error(exc)
                owner = next((f for f in self.forms if f.owns(key)), self.strategy)
                owner.show_error(key, message)
        self._config = config
        if sections["dataset"] and sections["model"]:
            self.inspector.request(sections["dataset"], sections["model"])
        if self._valid != (config is not None):
            self._valid = config is not None
            self.validity_changed.emit(self._valid)
        self.edited.emit()

    # ---- inspection ------------------------------------------------------------------
    def _on_inspect_started(self) -> None:
        self.dataset.set_status("Inspecting the dataset…")
        self.model.set_status("Building the model…")
        self.inspect_started.emit()

    def _on_inspected(self, result: dict, samples: str) -> None:
        dataset, model = result.get("dataset") or {}, result.get("model") or {}
        warnings = [str(w) for w in dataset.get("warnings") or []]
        self.dataset.set_status("\n".join([describe_dataset(dataset), *warnings]))
        self.model.set_status("")
        self.model.show_summary(model)
        self.inspected.emit(result, samples)

    def _on_inspect_failed(self, message: str) -> None:
        if message.startswith("model"):
            self.model.set_status(message, error=True)
            self.model.show_summary(None)
            self.dataset.set_status("")
        else:
            self.dataset.set_status(message, error=True)
            self.model.set_status("")
        self.inspect_failed.emit(message)
