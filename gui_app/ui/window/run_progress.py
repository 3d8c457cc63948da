"""RunProgress: a progress bar and one line of epoch, step, examples/s and time left."""
from __future__ import annotations

from collections import deque

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

RATE_WINDOW_S = 20.0  # the ETA follows the speed of the last 20 seconds


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


class RunProgress(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.bar = QProgressBar()
        self.bar.setMinimumWidth(220)
        self.bar.setFormat("%p%")
        layout.addWidget(self.bar, 2)
        self.label = QLabel()
        self.label.setMinimumWidth(360)
        layout.addWidget(self.label, 3)
        self.reset()

    def reset(self) -> None:
        self.total_steps = 0
        self.epochs = 0
        self.step = 0
        self.epoch = 0
        self.examples_per_sec: float | None = None
        self._times: deque[tuple[float, int]] = deque()
        self.bar.setRange(0, 1)
        self.bar.setValue(0)
        self.label.setText("No run yet: set up on the left and press Train (Ctrl+R)")

    def set_message(self, text: str) -> None:
        self.label.setText(text)

    def add_events(self, events: list[dict]) -> None:
        last_step = None
        for event in events:
            kind = event.get("type")
            if kind == "run_started":
                self.total_steps = int(event.get("total_steps") or 0)
                self.epochs = int(event.get("epochs") or 0)
                self.step = int(event.get("start_step") or 0)
                self._times.clear()
                self.bar.setRange(0, max(1, self.total_steps))
                self.bar.setValue(self.step)
                self.label.setText("Compiling the first steps…")
            elif kind == "progress":
                self._show_stage(event)
            elif kind == "step":
                last_step = event
                self._times.append((float(event.get("time") or 0.0), int(event.get("step") or 0)))
            elif kind == "eval":
                self.label.setText(f"Test accuracy {event.get('accuracy', 0):.2%} on {event.get('examples', 0):,} "
                                   "examples")
        if last_step is not None:
            self._show_step(last_step)

    def eta_seconds(self) -> float | None:
        while len(self._times) > 2 and self._times[-1][0] - self._times[0][0] > RATE_WINDOW_S:
            self._times.popleft()
        if len(self._times) < 2:
            return None
        (t0, s0), (t1, s1) = self._times[0], self._times[-1]
        if t1 <= t0 or s1 <= s0:
            return None
        return (self.total_steps - s1) * (t1 - t0) / (s1 - s0)

    def _show_step(self, event: dict) -> None:
        self.step = int(event.get("step") or 0)
        self.epoch = int(event.get("epoch") or 0)
        self.examples_per_sec = event.get("examples_per_sec")
        self.bar.setValue(min(self.step, self.bar.maximum()))
        parts = [f"Epoch {self.epoch}/{self.epochs}", f"step {self.step:,}/{self.total_steps:,}"]
        if isinstance(self.examples_per_sec, (int, float)):
            parts.append(f"{self.examples_per_sec:,.0f} examples/s")
        eta = self.eta_seconds()
        if eta is not None:
            parts.append(f"ETA {format_duration(eta)}")
        self.label.setText(" · ".join(parts))

    def _show_stage(self, event: dict) -> None:
        done, total = event.get("done"), event.get("total")
        what = event.get("what") or event.get("stage") or "preparing"
        if isinstance(done, (int, float)) and isinstance(total, (int, float)) and total > 0:
            self.bar.setRange(0, 1000)
            self.bar.setValue(int(1000 * done / total))
            self.label.setText(f"{str(event.get('stage', '')).capitalize()} {what}: {done / total:.0%}")
        else:
            self.bar.setRange(0, 0)  # busy indicator: the size is unknown
            self.label.setText(f"{str(event.get('stage', '')).capitalize()} {what}…")
