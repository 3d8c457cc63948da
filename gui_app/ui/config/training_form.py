"""TrainingForm: the hyperparameters (``RunConfig.training``).

Numbers the user is likely to type in scientific notation (learning rate, weight decay,
momentum, decay rate) and the optional seed are line edits: a spin box cannot hold ``3e-4``
and would silently clamp a wrong value instead of saying what is wrong with it.
"""
from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit, QSpinBox, QWidget

from gui_app.core.config import TrainingConfig
from gui_app.ui.config.form_base import FormSection, format_float, parse_float, parse_optional_int
from gui_app.ui.labels import ElidedComboBox

OPTIMIZER_LABELS = {"sgd": "SGD", "momentum": "SGD with momentum", "adam": "Adam", "adamw": "AdamW",
                    "rmsprop": "RMSprop"}
SCHEDULE_LABELS = {"constant": "Constant", "cosine": "Cosine decay", "step": "Step decay"}


class TrainingForm(FormSection):
    section = "training"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.epochs = self._spin("training.epochs", 0, 100_000)
        self.global_batch_size = self._spin("training.global_batch_size", 0, 1_000_000,
                                            "Examples per step over all replicas together")
        self.optimizer = self._combo("training.optimizer", OPTIMIZER_LABELS)
        self.learning_rate = self._number("training.learning_rate")
        self.momentum = self._number("training.momentum", "SGD with momentum and RMSprop")
        self.weight_decay = self._number("training.weight_decay", "AdamW only")
        self.schedule = self._combo("training.schedule", SCHEDULE_LABELS)
        self.warmup_steps = self._spin("training.warmup_steps", 0, 10_000_000,
                                       "Linear warm-up from 0 before the schedule starts")
        self.step_decay_epochs = self._spin("training.step_decay_epochs", 0, 100_000,
                                            "Step schedule: epochs between decays")
        self.step_decay_epochs.setSuffix(" epochs")
        self.step_decay_rate = self._number("training.step_decay_rate",
                                            "Step schedule: the learning rate is multiplied by this")
        self.seed = QLineEdit(placeholderText="random")
        self.add_field("training.seed", self.seed, "Same seed, same data order and initial weights")
        self.steps_per_call = self._spin("training.steps_per_call", 0, 100_000,
                                         "Training steps run inside one tf.function call; "
                                         "more is faster, fewer gives quicker stop and pause")
        self.checkpoint_every_steps = self._spin("training.checkpoint_every_steps", 0,
                                                 100_000_000, "0: at each epoch end and on stop only")
        self.checkpoint_every_steps.setSuffix(" steps")
        self.checkpoint_every_steps.setSpecialValueText("epoch end")
        self.accumulation_steps = self._spin(
            "training.accumulation_steps", 0, 1000,
            "Gradient accumulation: each replica splits its share of the global batch into this many micro-batches, "
            "sums their gradients and all-reduces once per step. Steps, epochs, the learning rate schedule and the "
            "loss mean the same as with 1; activation memory is a micro-batch's. Mirrored and multi-worker "
            "mirrored (not parameter servers).")
        self.accumulation_steps.setSuffix(" micro-batch")  # "1 micro-batch", "4 micro-batches"
        self.accumulation_steps.valueChanged.connect(
            lambda n: self.accumulation_steps.setSuffix(" micro-batch" if n == 1 else " micro-batches"))
        self.mixed_precision = QCheckBox("Mixed precision (float16 compute)")
        self.add_field("training.mixed_precision", self.mixed_precision, "Needs a GPU", text="")
        self.seed.textChanged.connect(self._on_edited)
        self.mixed_precision.toggled.connect(self._on_edited)
        self._gpu_selected = False
        self._accumulation_applies = True
        self.set_config_section(TrainingConfig())

    def _spin(self, key: str, low: int, high: int, tip: str | None = None) -> QSpinBox:
        # The lower bound is below the valid range on purpose: the config says what is wrong.
        spin = QSpinBox(minimum=low, maximum=high)
        spin.valueChanged.connect(self._on_edited)
        self.add_field(key, spin, tip)
        return spin

    def _number(self, key: str, tip: str | None = None) -> QLineEdit:
        edit = QLineEdit()
        edit.textChanged.connect(self._on_edited)
        self.add_field(key, edit, tip)
        return edit

    def _combo(self, key: str, choices: dict[str, str]) -> QComboBox:
        combo = ElidedComboBox()
        for value, text in choices.items():
            combo.addItem(text, value)
        combo.currentIndexChanged.connect(self._on_edited)
        self.add_field(key, combo)
        return combo

    # ---- RunConfig section -----------------------------------------------------------
    def config_section(self) -> TrainingConfig:
        return TrainingConfig(
            epochs=self.epochs.value(),
            global_batch_size=self.global_batch_size.value(),
            optimizer=self.optimizer.currentData(),
            learning_rate=parse_float("training.learning_rate", self.learning_rate),
            momentum=parse_float("training.momentum", self.momentum),
            weight_decay=parse_float("training.weight_decay", self.weight_decay),
            schedule=self.schedule.currentData(),
            warmup_steps=self.warmup_steps.value(),
            step_decay_epochs=self.step_decay_epochs.value(),
            step_decay_rate=parse_float("training.step_decay_rate", self.step_decay_rate),
            seed=parse_optional_int("training.seed", self.seed),
            steps_per_call=self.steps_per_call.value(),
            mixed_precision=self.mixed_precision.isChecked() and self._gpu_selected,
            checkpoint_every_steps=self.checkpoint_every_steps.value(),
            accumulation_steps=self.accumulation_steps.value() if self._accumulation_applies else 1,
        )

    def set_config_section(self, section: TrainingConfig) -> None:
        self.blockSignals(True)
        try:
            self.epochs.setValue(section.epochs)
            self.global_batch_size.setValue(section.global_batch_size)
            self.optimizer.setCurrentIndex(self.optimizer.findData(section.optimizer))
            self.learning_rate.setText(format_float(section.learning_rate))
            self.momentum.setText(format_float(section.momentum))
            self.weight_decay.setText(format_float(section.weight_decay))
            self.schedule.setCurrentIndex(self.schedule.findData(section.schedule))
            self.warmup_steps.setValue(section.warmup_steps)
            self.step_decay_epochs.setValue(section.step_decay_epochs)
            self.step_decay_rate.setText(format_float(section.step_decay_rate))
            self.seed.setText("" if section.seed is None else str(section.seed))
            self.steps_per_call.setValue(section.steps_per_call)
            self.checkpoint_every_steps.setValue(section.checkpoint_every_steps)
            self.accumulation_steps.setValue(section.accumulation_steps)
            self.mixed_precision.setChecked(section.mixed_precision)
        finally:
            self.blockSignals(False)
        self._on_edited()

    def set_gpu_selected(self, selected: bool) -> None:
        """Mixed precision only helps (and only works here) on a GPU."""
        self._gpu_selected = selected
        self._on_edited()

    def set_strategy(self, name: str) -> None:
        """Parameter-server workers apply every batch to the ps: accumulation does not apply there."""
        self._accumulation_applies = name != "parameter_server"
        self._on_edited()

    def _on_edited(self, *_: object) -> None:
        optimizer, schedule = self.optimizer.currentData(), self.schedule.currentData()
        self.momentum.setEnabled(optimizer in ("momentum", "rmsprop"))
        self.weight_decay.setEnabled(optimizer == "adamw")
        self.step_decay_epochs.setEnabled(schedule == "step")
        self.step_decay_rate.setEnabled(schedule == "step")
        self.mixed_precision.setEnabled(self._gpu_selected)
        self.accumulation_steps.setEnabled(self._accumulation_applies)
        self.mixed_precision.setToolTip("" if self._gpu_selected else "Needs a GPU: tick one in the Devices panel")
        if not self.signalsBlocked():
            self.changed.emit()
