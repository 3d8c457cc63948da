"""The New sweep dialog's rows: one per key to vary, with its kind (log range, range, integer
range, choices) and its ends or choices, as the sweep file's ``parameters`` (docs/config.md,
"Sweep files"). What the fields hold is checked by the sweep file's own parsing
(gui_app.core.sweep_config), so the dialog refuses what the CLI refuses, with the same line."""
from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

from gui_app.core.config import MODELS, OPTIMIZERS, SCHEDULES
from gui_app.core.wording import field, label

KINDS = {"log_uniform": "log range", "uniform": "range", "int": "integer range", "choice": "choices"}
# The keys offered, each with the kind and values a new row starts from (any other key of the run
# configuration can be swept from a sweep file).
SWEEPABLE: dict[str, tuple[str, str, str, str]] = {  # key: (kind, low, high, choices)
    "training.learning_rate": ("log_uniform", "0.0001", "0.1", ""),
    "training.global_batch_size": ("choice", "", "", "32, 64, 128"),
    "training.optimizer": ("choice", "", "", ", ".join(o for o in OPTIMIZERS if o != "rmsprop")),
    "training.epochs": ("int", "2", "10", ""),
    "training.momentum": ("uniform", "0.5", "0.99", ""),
    "training.weight_decay": ("log_uniform", "0.000001", "0.01", ""),
    "training.schedule": ("choice", "", "", ", ".join(SCHEDULES)),
    "training.warmup_steps": ("int", "0", "500", ""),
    "training.step_decay_rate": ("uniform", "0.1", "0.9", ""),
    "training.accumulation_steps": ("choice", "", "", "1, 2, 4"),
    "training.seed": ("choice", "", "", "1, 2, 3"),
    "model.name": ("choice", "", "", ", ".join(m for m in MODELS if m != "keras_file")),
}
KEY, KIND, LOW, HIGH, CHOICES, REMOVE = range(6)


def parse_value(text: str) -> Any:
    """A field's text as the sweep file would hold it: a number or true/false when it reads as
    one, else the text (which the sweep's parsing then names in its error)."""
    text = text.strip()
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (int, float, bool)) else text


def parse_choices(text: str) -> list[Any]:
    return [parse_value(part) for part in text.split(",") if part.strip()]


class ParameterTable(QWidget):
    """The rows; ``changed`` whenever a field changes, a row is added or removed."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.table = QTableWidget(0, 6)
        self.table.setHorizontalHeaderLabels(["Setting", "Kind", "Low", "High", "Choices", ""])
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(KEY, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(KIND, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(CHOICES, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(REMOVE, QHeaderView.ResizeMode.ResizeToContents)
        self.add_button = QPushButton("Add a setting to vary")
        self.add_button.clicked.connect(lambda: self.add_row())
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.table)
        layout.addLayout(buttons)

    def add_row(self, key: str | None = None) -> int:
        """A row for ``key`` (the first offered key not varied yet), filled with its start values."""
        used = set(self.keys())
        key = key or next((k for k in SWEEPABLE if k not in used), next(iter(SWEEPABLE)))
        row = self.table.rowCount()
        self.table.insertRow(row)
        key_box = QComboBox()
        for name in SWEEPABLE:
            key_box.addItem(label(name), name)
            key_box.setItemData(key_box.count() - 1, field(name), Qt.ItemDataRole.ToolTipRole)
        kind_box = QComboBox()
        for kind, text in KINDS.items():
            kind_box.addItem(text, kind)
        low, high, choices = QLineEdit(), QLineEdit(), QLineEdit(placeholderText="e.g. 32, 64, 128")
        remove = QPushButton("Remove")
        remove.clicked.connect(lambda: self._remove(remove))
        for column, widget in zip(range(6), (key_box, kind_box, low, high, choices, remove)):
            self.table.setCellWidget(row, column, widget)
        key_box.setCurrentIndex(key_box.findData(key))
        self._fill(row, key)
        key_box.currentIndexChanged.connect(lambda: self._fill(self._row_of(key_box), key_box.currentData()))
        kind_box.currentIndexChanged.connect(lambda: self._show_kind(self._row_of(kind_box)))
        for edit in (low, high, choices):
            edit.textChanged.connect(self.changed)
        self.changed.emit()
        return row

    def widget(self, row: int, column: int) -> Any:
        return self.table.cellWidget(row, column)

    def keys(self) -> list[str]:
        return [self.widget(row, KEY).currentData() for row in range(self.table.rowCount())]

    def parameters(self) -> dict[str, Any]:
        """The sweep file's ``parameters``: each row's key and its kind's values, as typed."""
        found: dict[str, Any] = {}
        for row in range(self.table.rowCount()):
            kind = self.widget(row, KIND).currentData()
            if kind == "choice":
                values = parse_choices(self.widget(row, CHOICES).text())
            else:
                values = [parse_value(self.widget(row, LOW).text()), parse_value(self.widget(row, HIGH).text())]
            found[self.widget(row, KEY).currentData()] = {kind: values}
        return found

    def _row_of(self, widget: QWidget) -> int:
        return next(row for row in range(self.table.rowCount())
                    if widget in (self.widget(row, column) for column in range(6)))

    def _fill(self, row: int, key: str) -> None:
        kind, low, high, choices = SWEEPABLE[key]
        kind_box = self.widget(row, KIND)
        kind_box.blockSignals(True)
        kind_box.setCurrentIndex(kind_box.findData(kind))
        kind_box.blockSignals(False)
        for column, text in ((LOW, low), (HIGH, high), (CHOICES, choices)):
            edit = self.widget(row, column)
            edit.blockSignals(True)
            edit.setText(text)
            edit.blockSignals(False)
        self._show_kind(row)

    def _show_kind(self, row: int) -> None:
        choice = self.widget(row, KIND).currentData() == "choice"
        for column, enabled in ((LOW, not choice), (HIGH, not choice), (CHOICES, choice)):
            self.widget(row, column).setEnabled(enabled)
        self.changed.emit()

    def _remove(self, button: QPushButton) -> None:
        self.table.removeRow(self._row_of(button))
        self.changed.emit()
