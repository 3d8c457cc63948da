"""InputBoundLabel: "input-bound: the replicas waited X % of the time for data", from the share
of the recent steps' time spent waiting for their batch (the run history's ``input_wait``,
from the steps' ``input_wait``: docs/events.md), with what to do about it -- or, when the examples
are in memory and the run's processes share the cores, that the wait is CPU contention
(gui_app.core.bottleneck). Hidden while the share is below :data:`THRESHOLD`."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from gui_app.core.bottleneck import CpuShare, input_wait_line
from gui_app.core.history import Part
from gui_app.ui.charts.run_view import RunView

THRESHOLD = 0.2  # below a fifth of the time waiting, faster input would not change much


class InputBoundLabel(QLabel, RunView):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setContentsMargins(8, 0, 8, 0)
        self.hide()

    def _history_changed(self, changed: int) -> None:
        if not changed & Part.TIMING:
            return
        share = self.history.input_wait.fraction()
        if share is not None and share >= THRESHOLD:
            # Whether waiting means input at all: in-memory examples on shared cores wait for a core.
            run = self.history.started
            cpu = CpuShare.of_run(run) if run is not None else None
            self.setText(input_wait_line(share, cpu, (run.dataset or {}).get("input_shape") if run else None))
            self.show()
        else:
            self.hide()
