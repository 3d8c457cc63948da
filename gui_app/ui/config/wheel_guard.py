"""WheelGuard: the mouse wheel over a field that does not have the focus scrolls the form.

A long form of spin boxes and lists changed values under a user who only meant to scroll past
them; a field takes the wheel only once the user has clicked into it.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QWidget


class WheelGuard(QObject):
    """Gives the wheel of an unfocused field to the form's scroll bar."""

    def __init__(self, scroll_bar: QWidget, parent: QObject) -> None:
        super().__init__(parent)
        self._scroll_bar = scroll_bar

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Wheel and not (isinstance(watched, QWidget) and watched.hasFocus()):
            QApplication.sendEvent(self._scroll_bar, event)
            return True
        return False
