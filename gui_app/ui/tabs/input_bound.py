"""InputBoundLabel: "input-bound: the replicas waited X % of the time for data", from the
``input_wait`` of the last step events (seconds a step waited for its batch; docs/events.md),
with what to do about it. Hidden while the share is below :data:`THRESHOLD`."""
from __future__ import annotations

from collections import deque
from typing import Iterable

from PySide6.QtWidgets import QLabel, QWidget

from gui_app.core.scaling import INPUT_ADVICE

THRESHOLD = 0.2  # below a fifth of the time waiting, faster input would not change much
WINDOW = 50  # steps: recent enough to follow a run that changes (cache warm, evaluation)


class InputWait:
    """The share of recent step time spent waiting for input (Qt-free, tested on its own)."""

    def __init__(self, window: int = WINDOW) -> None:
        self._steps: deque[tuple[float, float]] = deque(maxlen=window)

    def clear(self) -> None:
        self._steps.clear()

    def add(self, event: dict) -> bool:
        wait, step_time = event.get("input_wait"), event.get("step_time")
        if event.get("type") != "step" or not isinstance(wait, (int, float)) or not isinstance(step_time, (int, float)):
            return False
        if step_time <= 0:
            return False
        self._steps.append((min(float(wait), float(step_time)), float(step_time)))
        return True

    def fraction(self) -> float | None:
        total = sum(t for _, t in self._steps)
        return sum(w for w, _ in self._steps) / total if total > 0 else None


class InputBoundLabel(QLabel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setContentsMargins(8, 0, 8, 0)
        self.wait = InputWait()
        self.hide()

    def reset(self) -> None:
        self.wait.clear()
        self.hide()

    def add_events(self, events: Iterable[dict]) -> None:
        changed = False
        for event in events:
            if event.get("type") == "run_started" and not event.get("resumed"):
                self.wait.clear()
            changed = self.wait.add(event) or changed
        if changed:
            share = self.wait.fraction()
            if share is not None and share >= THRESHOLD:
                self.setText(f"input-bound: the replicas waited {share:.0%} of the time for data. Try: {INPUT_ADVICE}.")
                self.show()
            else:
                self.hide()
