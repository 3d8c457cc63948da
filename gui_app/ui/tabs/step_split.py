"""StepSplitLabel (Replicas tab): where each step's time goes over the last steps -- the
slowest replica's compute, the wait for input, and the all-reduce with the optimizer -- and,
when one part dominates, what to try (gui_app.core.scaling.step_time_split and bottleneck)."""
from __future__ import annotations

from collections import deque
from typing import Iterable

from PySide6.QtWidgets import QLabel, QWidget

from gui_app.core.scaling import bottleneck, step_time_split

WINDOW = 50  # steps


class StepSplitLabel(QLabel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setContentsMargins(8, 0, 8, 0)
        self._splits: deque[tuple[float, float, float]] = deque(maxlen=WINDOW)
        self._replicas = 1
        self.hide()

    def reset(self) -> None:
        self._splits.clear()
        self.hide()

    def shares(self) -> tuple[float, float, float] | None:
        """(compute, input, all-reduce and the rest) as fractions of the recent steps' time."""
        total = sum(sum(s) for s in self._splits)
        if total <= 0:
            return None
        return tuple(sum(s[i] for s in self._splits) / total for i in range(3))  # type: ignore[return-value]

    def add_events(self, events: Iterable[dict]) -> None:
        changed = False
        for event in events:
            kind = event.get("type")
            if kind == "run_started":
                if not event.get("resumed"):
                    self._splits.clear()
                self._replicas = int(event.get("num_replicas") or 1)
            elif kind == "step" and (split := step_time_split(event)) is not None:
                self._splits.append(split)
                changed = True
        if changed:
            self._show()

    def _show(self) -> None:
        compute, waited, rest = self.shares() or (0.0, 0.0, 0.0)
        text = (f"Where each step's time goes (last {len(self._splits)} steps): compute {compute:.0%} · "
                f"input {waited:.0%} · all-reduce and optimizer {rest:.0%}")
        advice = bottleneck(compute, waited, rest, self._replicas)
        self.setText(text + (f". <b>{advice[0].upper() + advice[1:]}</b>." if advice else ""))
        self.show()
