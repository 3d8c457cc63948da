"""Inspector: what a dataset and a model look like, asked of a background engine process.

``engine inspect CONFIG --json --samples FILE.npz`` loads the dataset and builds the model
(TensorFlow stays out of the GUI process) and prints class names, counts, shapes, the
parameter count and a layer summary; the npz holds a few sample images per class. Requests
are debounced and only sent when the dataset or model section really changed. Every answer
names the sections it was asked for (``pair``: the DatasetConfig and ModelConfig), so whoever
shows it can tell whether it still describes what is on the forms; and a request for other
sections, or :meth:`withdraw`, ends the process in flight (its slots are disconnected): its
answer would describe data that is no longer chosen. A model that cannot be built still comes
as an answer (exit 2 with the dataset described, ``model_error`` saying why): the dataset's
summary stays on screen beside the model's error.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from gui_app.core.config import DatasetConfig, ModelConfig, RunConfig
from gui_app.core.engine_output import EXIT_BAD_INPUT, EXIT_OK
from gui_app.ui.workers.engine_job import QUERY_TIMEOUT_S, EngineJob

Pair = tuple[DatasetConfig, ModelConfig]


class Inspector(QObject):
    started = Signal(object)  # the pair being inspected
    inspected = Signal(object, dict, str)  # the pair, the inspect answer, the path of the samples .npz
    failed = Signal(object, str)  # the pair, one line, e.g. "dataset.path: no such file: ..."

    def __init__(self, engine_command: Callable[..., list[str]], parent: QObject | None = None,
                 delay_ms: int = 250) -> None:
        super().__init__(parent)
        self._engine_command = engine_command
        self._timer = QTimer(self, singleShot=True, interval=delay_ms)
        self._timer.timeout.connect(self._run)
        self._wanted: Pair | None = None
        self._job: EngineJob | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="replica-studio-inspect-")
        self._count = 0
        self._reconnect = False  # the next inspection asks for a new connection (a host's)

    def request(self, dataset: DatasetConfig, model: ModelConfig) -> None:
        """Inspect these sections soon, unless they are what was last asked for (waiting, under
        way or answered: :meth:`retry` asks again)."""
        wanted = (dataset, model)
        if wanted == self._wanted:
            return
        self._end_job()  # its answer would be for sections no longer wanted
        self._wanted = wanted
        self._timer.start()  # restarts: a burst of edits gives one inspection

    def wanted(self) -> Pair | None:
        return self._wanted

    def is_busy(self) -> bool:
        """An inspection is asked for (the edit timer runs) or under way."""
        return self._timer.isActive() or (self._job is not None and self._job.is_running())

    def cancel(self) -> None:
        """Put the inspection off (a run starts): :meth:`retry` runs it later."""
        self._timer.stop()
        self._end_job()

    def withdraw(self) -> None:
        """Nothing is to be inspected any more (the sections became invalid)."""
        self.cancel()
        self._wanted = None

    def retry(self, reconnect: bool = False) -> None:
        """Inspect the wanted sections again (the files on disk may have changed); ``reconnect``
        (the user's Check again): on a new connection when the engine runs on a host, whose
        server may have changed since the shared connection was made."""
        if self._wanted is not None:
            self._reconnect = self._reconnect or reconnect
            self._timer.start()

    def _end_job(self) -> None:
        if self._job is not None:
            self._job.discard()
            self._job = None

    def _run(self) -> None:
        if self._wanted is None:
            return
        pair = self._wanted
        self._count += 1
        folder = Path(self._tmp.name)
        config_path, samples = folder / f"inspect-{self._count}.json", folder / f"samples-{self._count}.npz"
        RunConfig(dataset=pair[0], model=pair[1]).save(config_path)
        self.started.emit(pair)
        words = ["inspect", str(config_path), "--json", "--samples", str(samples)]
        if self._reconnect:
            words.append("--reconnect")  # without --host it changes nothing
            self._reconnect = False
        self._job = (EngineJob(self._engine_command(*words),
                               name="the inspection", timeout_s=QUERY_TIMEOUT_S, parent=self,
                               ok_codes=(EXIT_OK, EXIT_BAD_INPUT))
                     .on_result(lambda answer: self.inspected.emit(pair, answer, str(samples)))
                     .on_failure(lambda message: self.failed.emit(pair, message))
                     .start(replacing=self._job))
