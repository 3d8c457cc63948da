"""A decoded set held once in host memory: the in-memory :class:`~gui_app.engine.training.inputs.InputSource`.

The training pool (training and validation examples) and the test set are each one uint8 array
and one tensor on the same memory (``pipeline.host_tensor``); the validation split is a list of
rows, and every batch of training, validation and test is gathered by index
(engine/training/pipeline.py). A reader's array that TensorFlow cannot share (NumPy aligns to 16
bytes, TensorFlow needs 64) is copied once into one it can; sets decoded from files are decoded
straight into such arrays (``stream_read.decode_into_memory``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gui_app.core.config import DatasetConfig
from gui_app.engine.datasets.base import Dataset
from gui_app.engine.training import pipeline


class InMemoryInput:
    def __init__(self, dataset: Dataset, cfg: DatasetConfig, global_batch: int):
        import tensorflow as tf

        from gui_app.engine.datasets.stream_read import as_host_array

        self.name, self.class_names, self.input_shape = dataset.name, list(dataset.class_names), dataset.input_shape
        self.warnings = list(dataset.warnings)
        self._summary = dataset.summary()
        self._batch = global_batch
        self._train_rows, val_rows = pipeline.validation_rows(len(dataset.y_train), cfg)
        self._pool, self._test = as_host_array(dataset.x_train), as_host_array(dataset.x_test)
        with tf.device("/cpu:0"):  # the host's memory, whatever device trains
            self._pool_tensors = pipeline.host_tensor(self._pool), tf.constant(dataset.y_train.astype(np.int32))
            self._test_tensors = pipeline.host_tensor(self._test), tf.constant(dataset.y_test.astype(np.int32))
        self._test_rows = np.arange(len(dataset.y_test), dtype=np.int64)
        self._validation: tuple[Any, Any, np.ndarray] | None  # images, labels, rows
        if val_rows is not None:
            self._validation = (*self._pool_tensors, val_rows)
        elif cfg.validation == "test":
            self._validation = (*self._test_tensors, self._test_rows)
        else:
            self._validation = None

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def train_examples(self) -> int:
        return len(self._train_rows)

    @property
    def validation_examples(self) -> int:
        return 0 if self._validation is None else len(self._validation[2])

    def summary(self) -> dict[str, Any]:
        return {**self._summary, "train_examples": self.train_examples,
                "validation_examples": self.validation_examples}

    def train(self, strategy, epoch: int, start_batch: int, seed: int):
        return pipeline.distribute_train(strategy, *self._pool_tensors, self._train_rows, epoch, start_batch,
                                         self._batch, seed)

    def train_batch(self, epoch: int, batch: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(uint8 images, labels, their indices in the dataset's training set) of global batch
        ``batch`` of ``epoch``, as :meth:`train` deals it: the non-finite replay's input."""
        import tensorflow as tf

        rows = pipeline.step_rows(self._train_rows, epoch, batch, self._batch, seed)
        return self._pool[rows], tf.gather(self._pool_tensors[1], rows).numpy(), rows

    def validation(self, strategy):
        if self._validation is None:
            return None
        return pipeline.distribute_eval(strategy, *self._validation, self._batch)

    def test(self, strategy):
        return pipeline.distribute_eval(strategy, *self._test_tensors, self._test_rows, self._batch)

    def per_worker(self, coordinator):
        return pipeline.per_worker_dataset(coordinator, *self._pool_tensors, self._train_rows, self._batch)

    def normalization_stats(self) -> tuple:
        from gui_app.engine.training.models import channel_stats

        return channel_stats(self._pool, self._train_rows)

    def test_images(self, indices: np.ndarray) -> np.ndarray:
        return self._test[indices]
