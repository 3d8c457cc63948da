"""The error messages the forms show, read from the labels on screen."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from gui_app.ui.config.form_base import ERROR_LABEL


def shown_errors(widget: QWidget) -> dict[str, str]:
    """The visible error messages of a form or of the whole config panel, by config key (a
    section's own under the section's name)."""
    prefix = ERROR_LABEL.format("")
    return {label.objectName().removeprefix(prefix): label.text() for label in widget.findChildren(QLabel)
            if label.objectName().startswith(prefix) and not label.isHidden() and label.text()}
