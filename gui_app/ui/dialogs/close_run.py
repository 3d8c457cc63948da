"""The question when the window closes during a run: keep it training, stop it, or stay.

A run lives on its own (docs/detached.md), so closing the window need not end it: "Keep
training in the background" (the default) closes at once and lets go of the run, which the
run list shows as running at the next launch, ready to attach to; "Stop the run" stops it with
a checkpoint and closes when it has finished; "Cancel" leaves everything as it is.
"""
from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

KEEP, STOP, CANCEL = "keep", "stop", "cancel"


def close_question(parent: QWidget | None) -> QMessageBox:
    """The question as a message box, its buttons tagged with their answer (``answer`` property)."""
    box = QMessageBox(QMessageBox.Icon.Question, "A run is in progress",
                      "The run can go on without the window: reopen Replica Studio to follow it again.",
                      QMessageBox.StandardButton.NoButton, parent)
    keep = box.addButton("Keep training in the background", QMessageBox.ButtonRole.AcceptRole)
    stop = box.addButton("Stop the run", QMessageBox.ButtonRole.DestructiveRole)
    cancel = box.addButton(QMessageBox.StandardButton.Cancel)
    stop.setToolTip("Stop with a checkpoint (it can be resumed later), then close")
    for button, answer in ((keep, KEEP), (stop, STOP), (cancel, CANCEL)):
        button.setProperty("answer", answer)
    box.setDefaultButton(keep)
    box.setEscapeButton(cancel)
    return box


def ask_close_during_run(parent: QWidget | None) -> str:
    """KEEP, STOP or CANCEL (the box closed any other way: CANCEL)."""
    box = close_question(parent)
    box.exec()
    clicked = box.clickedButton()
    return (clicked.property("answer") if clicked is not None else None) or CANCEL
