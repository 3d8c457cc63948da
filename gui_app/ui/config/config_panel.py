"""ConfigPanel: the left column of the window, a form over the whole RunConfig.

It stacks the DevicePanel and the four section forms, keeps them consistent with each
other (ticked devices -> strategy replicas -> batch summary; a GPU -> mixed precision),
validates them and asks the Inspector about the dataset and model. Cross-section errors from
``RunConfig.__post_init__`` are shown on the form that owns the key they name.

When a field is checked: a choice (a list, a tick box, a file chooser) at once; a field typed
into when typing pauses (:data:`TYPING_PAUSE_MS`) or the field loses focus. While the user
types, the config is still validated on each keystroke, quietly (Train follows it), but no
message about a half-typed value is shown and nothing is inspected: the inspection runs an
engine process, and a half-typed path such as ``/`` is a folder that exists.

The dataset and model check (the inspection) gates Train: :meth:`train_blocker` is empty only
when the forms are valid and the last check of the dataset and model on the forms passed. An
answer is shown only when it is about the sections on the forms now; a check that passed is
remembered for those sections (the window keeps the last config that passed, so a relaunch
starts checked; the bundled digits with the small CNN are what the self-test trains, so the
first launch does too), and a newer check that fails takes that back.
"""
from __future__ import annotations

from typing import Any, Callable, cast

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QGroupBox,
    QLineEdit,
    QPlainTextEdit,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from gui_app.core.config import ConfigError, DatasetConfig, ModelConfig, RunConfig, RuntimeConfig, StrategyConfig
from gui_app.core.wording import for_people
from gui_app.ui.config import DatasetForm, FormSection, ModelForm, StrategyForm, TrainingForm, split_error
from gui_app.ui.config.device_panel import DevicePanel
from gui_app.ui.config.wheel_guard import WheelGuard
from gui_app.ui.tabs.dataset import describe_dataset
from gui_app.ui.workers.inspector import Inspector, Pair

TYPING_PAUSE_MS = 600  # long enough for a word, short enough to feel immediate
KNOWN_GOOD: Pair = (DatasetConfig(), ModelConfig())  # the bundled digits and the small CNN (the self-test's)
MAX_REMEMBERED_CHECKS = 64
NOT_VALID = "Fix the fields marked in red first"
TYPING = "Finish the field you are typing in"
CHECKING = "Checking the dataset and model first…"
CANNOT_RUN = "cannot run commands (see Devices)"  # the host's own failure, told whole on the Devices section


def first_launch_config(gpus: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Digits and the small CNN, mirrored over the GPUs, or over two logical CPUs on a machine
    without one, so that two replicas show anywhere."""
    if gpus:
        return RunConfig(strategy=StrategyConfig(name="mirrored", devices=tuple(gpus)))
    return RunConfig(strategy=StrategyConfig(name="mirrored", devices=("CPU:0", "CPU:1")),
                     runtime=RuntimeConfig(cpu_devices=2))


MIN_LIST_CHARACTERS = 14  # the width a list asks for; longer entries show whole in its drop-down


class ConfigPanel(QScrollArea):
    validity_changed = Signal(bool)  # the forms describe a valid RunConfig (saving it, the tools)
    readiness_changed = Signal(str)  # :meth:`train_blocker`: "" once Train may start, else why not
    edited = Signal()  # the forms were checked (an edit, or a check that answered): the window remembers
    inspected = Signal(dict, str)  # inspect answer, samples .npz: about the sections on the forms
    inspect_failed = Signal(str)
    inspect_started = Signal()
    inspect_cleared = Signal()  # the forms' dataset or model changed: earlier answers no longer apply
    host_failed = Signal(str)  # the check's failure is the Run on host's own: its line, for the Devices section

    def __init__(self, engine_command: Callable[..., list[str]], parent: QWidget | None = None,
                 failed_host: Callable[[str], str | None] = lambda _line: None) -> None:
        super().__init__(parent)
        self._failed_host = failed_host  # the Run on host, when a line is its own failure (RunPlace.failed_host)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        column = QVBoxLayout(body)
        self.devices = DevicePanel()
        self.dataset = DatasetForm()
        self.model = ModelForm()
        self.strategy = StrategyForm()
        self.strategy.cluster.check.configure(engine_command, self.config)
        self.training = TrainingForm()
        for title, widget in (("Devices", self.devices), ("Dataset", self.dataset), ("Model", self.model),
                              ("Strategy", self.strategy), ("Hyperparameters", self.training)):
            box = QGroupBox(title)
            QVBoxLayout(box).addWidget(widget)
            column.addWidget(box)
        column.addStretch(1)
        # A list as wide as its longest entry made the forms 520 px wide at least (the window
        # then did not fit a 1280 px screen): lists ask for a few characters and elide the rest.
        # Before anything asks for a size: a list keeps the minimum size it computed first.
        for combo in body.findChildren(QComboBox):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(MIN_LIST_CHARACTERS)
        self.setWidget(body)
        self._body = body  # self.widget(), typed: it is never replaced
        self._wheel_guard = WheelGuard(self.verticalScrollBar(), self)
        # Scrolling the form must not change the spin box or list the pointer passes over
        # (it turned 30 epochs into 21): they take the wheel only once clicked into.
        for field in body.findChildren(QAbstractSpinBox) + body.findChildren(QComboBox):
            field.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            field.installEventFilter(self._wheel_guard)
        self._fit_width()
        self.forms: list[FormSection] = [self.dataset, self.model, self.strategy, self.training]

        self._engine_command = engine_command
        self.inspector = Inspector(engine_command, self)
        self.inspector.started.connect(self._on_inspect_started)
        self.inspector.inspected.connect(self._on_inspected)
        self.inspector.failed.connect(self._on_inspect_failed)
        self._config: RunConfig | None = None
        self._valid: bool | None = None
        self._blocker: str | None = None
        self._busy = False
        self._typing = False  # the last check was a quiet one, while typing
        self._pair: Pair | None = None  # the dataset and model sections on the forms (None: not valid)
        self._checks: dict[Pair, str] = {KNOWN_GOOD: ""}  # each check's outcome: "" passed, else why not
        self._pause = QTimer(self, singleShot=True, interval=TYPING_PAUSE_MS)
        self._pause.timeout.connect(self.revalidate)
        app = QApplication.instance()
        assert isinstance(app, QApplication)  # a widget exists: the application is a QApplication
        app.focusChanged.connect(self._on_focus_changed)  # leaving a field checks it
        for edit in body.findChildren(QLineEdit) + body.findChildren(QAbstractSpinBox):
            edit.editingFinished.connect(self.flush)  # Enter, too
        self.prefer_gpus = False  # first launch: once GPUs are detected, mirror over them
        self.devices.changed.connect(self._on_devices_changed)
        self.devices.detected.connect(self._on_devices_detected)
        self.dataset.open_failed.connect(lambda message: self.dataset.set_status(message, error=True))
        for checked in (self.dataset, self.model):
            checked.check_again.connect(lambda: self.inspector.retry(reconnect=True))
        for form in self.forms:
            form.changed.connect(self._on_changed)
        self._on_devices_changed()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self._fit_width()  # a field shown or hidden may change how narrow the forms can be
        return super().eventFilter(watched, event)

    def _fit_width(self) -> None:
        """Never narrower than the forms can be: the panel scrolls vertically only, and a form
        wider than the panel would scroll sideways out of sight when a field takes the focus."""
        self.setMinimumWidth(self._body.minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()
                             + 2 * self.frameWidth())

    # ---- public ----------------------------------------------------------------------
    def config(self) -> RunConfig | None:
        """The RunConfig the forms describe, or None while any field is invalid."""
        return self._config

    def is_valid(self) -> bool:
        return self._config is not None

    def train_blocker(self) -> str:
        """Why Train cannot start with what is on the forms ("" when it can): a field is not
        valid, or the dataset and model have not passed their check (yet)."""
        if self._config is None:
            if self._typing:
                return TYPING
            red = [name for form in self.forms for name in form.fields_in_red()]
            return f"{NOT_VALID}: {', '.join(red)}" if red else NOT_VALID
        outcome = self._checks.get(self._pair) if self._pair is not None else None
        if outcome is None:
            return CHECKING
        host = self._failed_host(outcome)
        if host is not None:
            return f"Dataset and model not checked: {host} {CANNOT_RUN}"
        return f"The check of the dataset and model failed: {for_people(outcome)}" if outcome else ""

    def checked_config(self) -> RunConfig | None:
        """The config on the forms when Train may start with it (valid, and checked)."""
        return None if self.train_blocker() else self._config

    def set_config(self, config: RunConfig, checked: bool = False) -> None:
        """Fill the forms; ``checked``: its dataset and model passed their check before (the
        window's last config), so Train need not wait for the check that runs now."""
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
        if checked:
            pair = self._sections()
            if pair is not None:
                self._remember_check(pair, "")
        self._pause.stop()
        self._sync_devices()
        self.revalidate()

    def flush(self) -> None:
        """Check a field being typed into now (it lost focus, Enter, or Train was pressed)."""
        if self._pause.isActive():
            self._pause.stop()
            self.revalidate()

    def _on_focus_changed(self, _old: QWidget | None, _new: QWidget | None) -> None:
        self.flush()

    def start_detection(self) -> None:
        self.devices.start_detection(self._engine_command)

    def place_changed(self) -> None:
        """The engine commands run elsewhere now (Run on: another SSH host, or this computer):
        the devices there are detected, and the dataset and model checked there again (its
        paths are the host's)."""
        self._checks = {KNOWN_GOOD: ""}
        self.start_detection()
        self.inspector.retry()
        self._update_blocker()

    def set_locked(self, locked: bool) -> None:
        """No edits while a run uses this configuration."""
        self._body.setEnabled(not locked)

    # ---- keeping the sections consistent ---------------------------------------------
    def _on_devices_changed(self) -> None:
        if self._busy:
            return
        self._sync_devices()
        self._on_changed()

    def _sync_devices(self) -> None:
        self._busy = True
        try:
            self.strategy.set_devices(self.devices.selected_devices(), self.devices.available_devices())
        finally:
            self._busy = False

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

    def _typed_into(self) -> QWidget | None:
        """The field of this panel the user is typing into, if any."""
        widget = QApplication.focusWidget()
        if isinstance(widget, (QLineEdit, QPlainTextEdit, QAbstractSpinBox)) and self.isAncestorOf(widget):
            return widget
        return None

    def _on_changed(self) -> None:
        if self._busy:
            return
        if self._typed_into() is not None:
            self._pause.start()  # restarts: the check waits for a pause
            self.revalidate(typing=True)
        else:
            self._pause.stop()
            self.revalidate()

    def revalidate(self, typing: bool = False) -> None:
        """Validate the forms and follow the dataset and model check. ``typing``: quietly -- no
        message appears or stays about the field being typed into, nothing is inspected and the
        window remembers nothing (the pause, or leaving the field, checks it for real)."""
        if self._busy:
            return
        self._busy = True
        try:
            self.devices.set_ticks_enabled(self.strategy.name.currentData() == "mirrored")
            self.strategy.set_global_batch(self.training.global_batch_size.value(),
                                           self.training.accumulation_steps.value())
            self.strategy.set_replicas_per_worker(len(self.devices.gpu_names()) or self.devices.cpu_devices.value())
            self.training.set_gpu_selected(self._gpu_in_use())
            self.training.set_strategy(self.strategy.name.currentData())
            if not typing:
                self.dataset.follow_source_images()  # before the check: one inspection, at the images' size
            sections = {form.section: form.validate(show=not typing) for form in self.forms}
        finally:
            self._busy = False
        config = None
        if all(sections.values()):
            try:
                # all() above: no section is None.
                config = RunConfig(runtime=self.devices.config_section(), **cast(dict[str, Any], sections))
            except ConfigError as exc:
                if not typing:
                    key, message = split_error(exc)
                    owner = next((f for f in self.forms if f.owns(key)), self.strategy)
                    owner.show_error(key, message)
        self._config, self._typing = config, typing
        if typing:
            self._hide_error_of(self._typed_into())
        dataset, model = sections["dataset"], sections["model"]
        self._follow((dataset, model) if dataset and model else None, ask=not typing)
        if self._valid != (config is not None):
            self._valid = config is not None
            self.validity_changed.emit(self._valid)
        self._update_blocker()
        if not typing:
            self.edited.emit()

    def _hide_error_of(self, widget: QWidget | None) -> None:
        """A message about the field being typed into would speak of a value no longer there."""
        for form in self.forms:
            key = form.key_of(widget) if widget is not None else None
            if key is not None:
                form.clear_error(key)

    def _sections(self) -> Pair | None:
        try:
            return self.dataset.config_section(), self.model.config_section()
        except ConfigError:
            return None

    # ---- the dataset and model check -------------------------------------------------
    def _follow(self, pair: Pair | None, ask: bool) -> None:
        """The forms' dataset and model are ``pair`` now: clear what was shown about others,
        and (``ask``) have them inspected."""
        if pair != self._pair:
            self._pair = pair
            self.inspector.withdraw()  # an answer about other sections would never be shown
            self.dataset.set_status("")
            self.model.set_status("")
            self.model.mark_stale()
            self.inspect_cleared.emit()
        if ask and pair is not None:
            self.inspector.request(*pair)

    def _remember_check(self, pair: Pair, outcome: str) -> None:
        self._checks.pop(pair, None)
        self._checks[pair] = outcome
        while len(self._checks) > MAX_REMEMBERED_CHECKS:
            del self._checks[next(iter(self._checks))]

    def _update_blocker(self) -> None:
        blocker = self.train_blocker()
        if blocker != self._blocker:
            self._blocker = blocker
            self.readiness_changed.emit(blocker)

    def _on_inspect_started(self, pair: Pair) -> None:
        if pair != self._pair:
            return
        self.dataset.set_status("Inspecting the dataset…")
        self.model.set_status("Building the model…")
        self.model.mark_stale()
        self.inspect_started.emit()

    def _on_inspected(self, pair: Pair, result: dict, samples: str) -> None:
        model_error = str(result.get("model_error") or "")  # the dataset is fine, the model is not
        self._remember_check(pair, model_error)
        if pair == self._pair:
            dataset, model = result.get("dataset") or {}, result.get("model") or {}
            warnings = [str(w) for w in dataset.get("warnings") or []]
            self.dataset.set_status("\n".join([describe_dataset(dataset), *warnings]))
            self.dataset.show_source_images(dataset.get("source_images"))
            if model_error:
                self.model.set_status(for_people(model_error), error=True, retry=True)
            else:
                self.model.set_status("")
            self.model.show_summary(model)
            self.inspected.emit(result, samples)
        self._update_blocker()
        self.edited.emit()

    def _on_inspect_failed(self, pair: Pair, message: str) -> None:
        self._remember_check(pair, message)
        host = self._failed_host(message)
        if pair == self._pair and host is not None:  # told whole once, on the Devices section
            self.host_failed.emit(message)
            message = f"Not checked: {host} {CANNOT_RUN}"
        if pair == self._pair:
            if message.startswith("model"):
                self.model.set_status(for_people(message), error=True, retry=True)
                self.model.show_summary(None)
                self.dataset.set_status("")
            else:
                self.dataset.set_status(for_people(message), error=True, retry=True)
                self.model.set_status("")
            self.inspect_failed.emit(for_people(message))
        self._update_blocker()
