"""What training reads, one interface for a set in memory and a streamed one.

The run controller, the step runners and the final evaluation ask an :class:`InputSource` for
everything they read, so none of them knows where the examples come from:
:class:`~gui_app.engine.training.in_memory.InMemoryInput` (decoded once, gathered by index) or
:class:`~gui_app.engine.training.streaming.StreamedInput` (read from the files as it trains).
``dataset.loading`` chooses (engine/datasets/loading.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from gui_app.core.config import RunConfig
from gui_app.engine.datasets.base import Dataset, ProgressCallback
from gui_app.engine.datasets.streamed import StreamSource


class InputSource(Protocol):
    name: str
    class_names: list[str]
    input_shape: tuple[int, int, int]
    warnings: list[str]

    @property
    def num_classes(self) -> int: ...

    @property
    def train_examples(self) -> int: ...

    @property
    def validation_examples(self) -> int:
        """0 without a validation set."""

    def summary(self) -> dict[str, Any]:
        """The ``dataset`` section of ``run_started``."""

    def train(self, strategy, epoch: int, start_batch: int, seed: int):
        """The distributed batches of one epoch, from global batch ``start_batch``, in the order of
        ``seed`` (docs/architecture.md, "Decisions": exact resume)."""

    def validation(self, strategy):
        """The validation set for ``Evaluator.evaluate``, or None."""

    def test(self, strategy):
        """The test set for ``Evaluator.evaluate``, in a fixed order."""

    def per_worker(self, coordinator):
        """Parameter servers: an iterator over each worker's own endless batches."""

    def normalization_stats(self) -> tuple:
        """Per-channel (mean, variance) of the training images for the model's Normalization layer."""

    def test_images(self, indices: np.ndarray) -> np.ndarray:
        """The uint8 test images at ``indices`` (for misclassified.npz)."""


def open_source(config: RunConfig, progress: ProgressCallback | None, data_dir: Path, dataset: Dataset | None = None
                ) -> InputSource:
    """The run's input: ``dataset`` (already read) in memory, else as ``dataset.loading`` decides.
    ``data_dir``: the run's data folder (``dataset.cache: file``). Raises DatasetError for bad
    files, ValueError for a split that leaves nothing to train on."""
    from gui_app.engine.datasets.loading import open_input
    from gui_app.engine.training.in_memory import InMemoryInput
    from gui_app.engine.training.streaming import StreamedInput

    batch = config.training.global_batch_size
    if dataset is None:
        opened = open_input(config.dataset, progress)
        if isinstance(opened, StreamSource):
            return StreamedInput(opened, config.dataset, batch, data_dir)
        dataset = opened
    return InMemoryInput(dataset, config.dataset, batch)
