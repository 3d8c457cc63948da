"""ResumeDialog: resume a failed run with a smaller batch or a lower learning rate.

A run that failed (out of memory, a diverging loss) keeps its last good checkpoint; resuming
it unchanged would fail the same way. The dialog shows why it failed and offers the settings a
checkpoint can carry on with (gui_app.core.overrides: batch, learning rate, epochs), prefilled
with the run's own; :meth:`overrides` gives the ``--set KEY=VALUE`` words of what changed.
"""
from __future__ import annotations

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.overrides import apply_overrides
from gui_app.core.rundir import RunInfo
from gui_app.ui.colors import ERROR_STYLE
from gui_app.ui.screen_fit import ScreenFit


class ResumeDialog(QDialog):
    def __init__(self, run: RunInfo, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Resume {run.name}")
        ScreenFit(self)
        self._config = run.config or RunConfig()
        training = self._config.training
        why = QLabel(f"The run failed at step {run.step}: {run.message or 'no reason was recorded'}\n\n"
                     "It continues from its last checkpoint. Change what made it fail:", wordWrap=True)
        self.batch = QSpinBox(minimum=1, maximum=1_000_000, value=training.global_batch_size)
        self.learning_rate = QDoubleSpinBox(decimals=6, minimum=1e-6, maximum=10.0, singleStep=1e-4,
                                            value=training.learning_rate)
        self.epochs = QSpinBox(minimum=1, maximum=100_000, value=training.epochs)
        form = QFormLayout()
        form.addRow("Global batch", self.batch)
        form.addRow("Learning rate", self.learning_rate)
        form.addRow("Epochs", self.epochs)
        self._error = QLabel(wordWrap=True)
        self._error.setStyleSheet(ERROR_STYLE)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        buttons.addButton("Resume", QDialogButtonBox.ButtonRole.AcceptRole).setDefault(True)
        buttons.accepted.connect(self._on_accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(why)
        layout.addLayout(form)
        layout.addWidget(self._error)
        layout.addWidget(buttons)

    def overrides(self) -> list[str]:
        """``KEY=VALUE`` for each setting that differs from the run's config."""
        training = self._config.training
        changed = {"training.global_batch_size": (self.batch.value(), training.global_batch_size),
                   "training.learning_rate": (self.learning_rate.value(), training.learning_rate),
                   "training.epochs": (self.epochs.value(), training.epochs)}
        return [f"{key}={new}" for key, (new, old) in changed.items() if new != old]

    def _on_accept(self) -> None:
        try:  # the engine validates too; saying it here keeps the dialog open to fix it
            apply_overrides(self._config, self.overrides())
        except ConfigError as exc:
            self._error.setText(str(exc))
            return
        self.accept()
