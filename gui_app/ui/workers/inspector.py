"""Inspector: what a dataset and a model look like, asked of a background engine process.

``engine inspect CONFIG --json --samples FILE.npz`` loads the dataset and builds the model
(TensorFlow stays out of the GUI process) and prints class names, counts, shapes, the
parameter count and a layer summary; the npz holds a few sample images per class. Requests
are debounced, only sent when the dataset or model section really changed, and a newer
request replaces the one in flight (its slots are disconnected, its process ended): its answer
would describe data that is no longer chosen.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from gui_app.core.config import DatasetConfig, ModelConfig, RunConfig
from gui_app.ui.workers.engine_job import QUERY_TIMEOUT_S, EngineJob


class Inspector(QObject):
    started = Signal()
    inspected = Signal(dict, str)  # the inspect answer, path of the samples .npz
    failed = Signal(str)  # one line, e.g. "dataset.path: no such file: ..."

    def __init__(self, engine_command: Callable[..., list[str]], parent: QObject | None = None,
                 delay_ms: int = 400) -> None:
        super().__init__(parent)
        self._engine_command = engine_command
        self._timer = QTimer(self, singleShot=True, interval=delay_ms)
        self._timer.timeout.connect(self._run)
        self._wanted: tuple[DatasetConfig, ModelConfig] | None = None
        self._sent: tuple[DatasetConfig, ModelConfig] | None = None
        self._job: EngineJob | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="replica-studio-inspect-")
        self._count = 0

    def request(self, dataset: DatasetConfig, model: ModelConfig) -> None:
        """Inspect these sections soon, unless they are what was last inspected."""
        wanted = (dataset, model)
        if wanted == self._wanted:
            return
        self._wanted = wanted
        self._timer.start()  # restarts: a burst of edits gives one inspection

    def is_busy(self) -> bool:
        """An inspection is asked for (the edit timer runs) or under way."""
        return self._timer.isActive() or (self._job is not None and self._job.is_running())

    def cancel(self) -> None:
        self._timer.stop()
        if self._job is not None:
            self._job.discard()
            self._job = None

    def _run(self) -> None:
        if self._wanted is None or self._wanted == self._sent:
            return
        self._sent = self._wanted
        self._count += 1
        folder = Path(self._tmp.name)
        config_path, samples = folder / f"inspect-{self._count}.json", folder / f"samples-{self._count}.npz"
        dataset, model = self._wanted
        RunConfig(dataset=dataset, model=model).save(config_path)
        self.started.emit()
        self._job = (EngineJob(self._engine_command("inspect", str(config_path), "--json", "--samples", str(samples)),
                               name="the inspection", timeout_s=QUERY_TIMEOUT_S, parent=self)
                     .on_result(lambda answer: self.inspected.emit(answer, str(samples)))
                     .on_failure(self._on_failed)
                     .start(replacing=self._job))

    def _on_failed(self, message: str) -> None:
        self._sent = None  # the same sections may be fixed on disk: let them be asked again
        self.failed.emit(message)

    def retry(self) -> None:
        """Inspect the current sections again (the file on disk may have changed)."""
        self._sent = None
        if self._wanted is not None:
            self._timer.start()
