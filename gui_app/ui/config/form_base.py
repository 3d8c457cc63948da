"""FormSection: a form over one section of the RunConfig, with inline validation messages.

Each form builds its section's frozen dataclass from the widgets (``config_section()``); the
dataclass validates itself, and a :class:`ConfigError` names the key that is wrong, e.g.
``training.learning_rate: must be > 0; got -1.0``. ``validate()`` turns that into a red
message under the field with that key, so the rules live in one place (gui_app.core.config)
and the form never repeats them. Fields are labelled as gui_app.core.wording names their keys,
so messages elsewhere (advice, the engine's errors) can name a field as the user sees it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

from gui_app.core import wording
from gui_app.core.config import ConfigError
from gui_app.ui.colors import ERROR_COLOR, ERROR_STYLE
from gui_app.ui.labels import ElidedComboBox

INVALID_PROPERTY = "invalid"
ERROR_LABEL = "error:{}"  # an error label's object name: the config key it speaks of (the section's, for its own)


def split_error(error: Exception) -> tuple[str, str]:
    """``("training.learning_rate", "must be > 0; got -1.0")`` from a ConfigError."""
    text = str(error)
    key, sep, message = text.partition(": ")
    if sep and key and " " not in key:
        return key, message
    return "", text


def parse_float(key: str, edit: QLineEdit) -> float:
    text = edit.text().strip()
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{key}: must be a number; got {text!r}") from None


def parse_optional_int(key: str, edit: QLineEdit) -> int | None:
    text = edit.text().strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{key}: must be a whole number or empty; got {text!r}") from None


def choice_box(labels: Mapping[Any, str]) -> QComboBox:  # keys: config values, None among them
    """A combo box showing ``labels``' values, with the config value (the key) as item data; a long
    value is cut with "…" in a narrow panel, whole in the tooltip."""
    box = ElidedComboBox()
    for key, label in labels.items():
        box.addItem(label, key)
    return box


def format_float(value: float) -> str:
    return f"{value:g}"


class FormSection(QWidget):
    """Base of the four forms. Subclasses add fields with :meth:`add_field` and implement
    ``config_section()`` / ``set_config_section()``; they emit :attr:`changed` on any edit."""

    changed = Signal()
    check_again = Signal()  # the user asks for the dataset and model check once more (the files changed)
    section = ""  # "dataset", "model", ...

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.form = QFormLayout()
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        outer.addLayout(self.form)
        self._fields: dict[str, QWidget] = {}
        self._rows: dict[str, QWidget] = {}  # the row holder of each key (for show_row)
        self._error_labels: dict[str, QLabel] = {}
        self.section_error = self._make_error_label(self.section)  # errors that belong to no single field
        outer.addWidget(self.section_error)

    # ---- building --------------------------------------------------------------------
    def add_field(self, key: str, widget: QWidget, tip: str | None = None, row_widget: QWidget | None = None,
                  text: str | None = None) -> QWidget:
        """Add a row for config key ``key`` (``"training.epochs"``), labelled as
        gui_app.core.wording names it (``text`` when the widget carries its own, as a check box
        does); ``row_widget`` lets a composite (an edit with a button) stand in the row while
        ``widget`` gets the red frame."""
        holder = QWidget()
        column = QVBoxLayout(holder)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        column.addWidget(row_widget or widget)
        error = self._make_error_label(key)
        column.addWidget(error)
        if tip:
            widget.setToolTip(tip)
        label_widget = QLabel(wording.label(key) if text is None else text)
        label_widget.setBuddy(widget)
        self.form.addRow(label_widget, holder)
        self._fields[key] = widget
        self._rows[key] = holder
        self._error_labels[key] = error
        return widget

    def add_status(self) -> None:
        """The line that says what the dataset and model check found, with a "Check again" link
        after a failure (the user may have fixed the files since)."""
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.check_again_link = QLabel("<a href='#'>Check again</a>")
        self.check_again_link.linkActivated.connect(lambda _: self.check_again.emit())
        self.check_again_link.hide()
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.status, 1)
        layout.addWidget(self.check_again_link, 0, Qt.AlignmentFlag.AlignTop)
        self.form.addRow(row)

    def set_status(self, text: str, error: bool = False, retry: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet(ERROR_STYLE if error else "")
        self.check_again_link.setVisible(retry and bool(text))

    def show_row(self, key: str, applies: bool) -> None:
        """Show the row of ``key`` only where it applies (and disable it otherwise, so a hidden
        field is never read as set): ten greyed rows for a dataset that has none of them
        bury the two that matter."""
        self._fields[key].setEnabled(applies)
        self.form.setRowVisible(self._rows[key], applies)

    def _make_error_label(self, key: str) -> QLabel:
        label = QLabel()
        label.setObjectName(ERROR_LABEL.format(key))
        label.setWordWrap(True)
        label.setStyleSheet(ERROR_STYLE)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.hide()
        return label

    # ---- validation ------------------------------------------------------------------
    def config_section(self) -> Any:  # pragma: no cover - every form overrides it
        raise NotImplementedError

    def set_config_section(self, section: Any) -> None:  # pragma: no cover
        raise NotImplementedError

    def validate(self, show: bool = True) -> Any | None:
        """The section if it is valid; otherwise ``None`` with the message shown inline
        (``show=False``: the messages on screen are left as they are)."""
        if show:
            self.clear_errors()
        try:
            return self.config_section()
        except ConfigError as exc:
            if show:
                self.show_error(*split_error(exc))
            return None

    def owns(self, key: str) -> bool:
        return key == self.section or key.startswith(self.section + ".")

    def show_error(self, key: str, message: str) -> None:
        label = self._error_labels.get(key, self.section_error)
        if key in self._rows and self._rows[key].isHidden():
            label = self.section_error  # a config file set a field this dataset hides: say it where it shows
        message = wording.for_people(message)
        if label is self.section_error and key and (key not in self._fields or self._rows[key].isHidden()):
            message = f"{key}: {message}"  # no field on show to name it by: the config file's key
        label.setText(message)
        label.show()
        widget = self._fields.get(key)
        if widget is not None:
            widget.setProperty(INVALID_PROPERTY, True)
            widget.setStyleSheet(f"border: 1px solid {ERROR_COLOR};")

    def fields_in_red(self) -> list[str]:
        """Where this form shows an error now, as the forms name it ("Hyperparameters → Learning
        rate"; the section's own name for an error that belongs to no field on show): what Train's
        tooltip lists, so a field marked far down the scrolled forms is found without a search."""
        names = [wording.field(key) for key, widget in self._fields.items() if widget.property(INVALID_PROPERTY)]
        if not self.section_error.isHidden():
            names.append(wording.SECTIONS.get(self.section, self.section))
        return names

    def clear_errors(self) -> None:
        for key in self._fields:
            self.clear_error(key)
        self.section_error.clear()
        self.section_error.hide()

    def clear_error(self, key: str) -> None:
        self._error_labels[key].clear()
        self._error_labels[key].hide()
        widget = self._fields[key]
        if widget.property(INVALID_PROPERTY):
            widget.setProperty(INVALID_PROPERTY, False)
            widget.setStyleSheet("")

    def key_of(self, widget: QWidget) -> str | None:
        """The config key whose row holds ``widget`` (a spin box's inner edit counts), or None."""
        return next((key for key, row in self._rows.items() if row is widget or row.isAncestorOf(widget)), None)
