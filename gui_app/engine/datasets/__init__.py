"""Datasets: read the one ``dataset`` section of a run config into uint8 NHWC arrays.

    from gui_app.engine.datasets import load_dataset
    ds = load_dataset(DatasetConfig(name="digits"))
    ds.x_train.shape, ds.class_names, ds.summary()

Every reader returns train and test sets (the training pipeline holds out its own
validation split and scales to float). ``progress`` receives
``{"stage": "download" | "read" | "decode", "what": ..., "done": ..., "total": ... or None}``
a few times a second at most; the engine forwards them as ``progress`` events. Nothing here
writes to stdout. Bad input raises :class:`DatasetError` with one line naming the file.
"""
from __future__ import annotations

from typing import Callable

from gui_app.core.config import DatasetConfig
from gui_app.engine.datasets.arrays import load_idx_folder, load_npz
from gui_app.engine.datasets.base import Dataset, DatasetError, ProgressCallback
from gui_app.engine.datasets.bundled import load_digits
from gui_app.engine.datasets.images import load_image_folder
from gui_app.engine.datasets.standard import load_cifar_named, load_mnist_like

__all__ = ["Dataset", "DatasetError", "load_dataset"]

_LOADERS: dict[str, Callable[[DatasetConfig, ProgressCallback | None], Dataset]] = {
    "digits": lambda cfg, progress: load_digits(),
    "mnist": load_mnist_like,
    "fashion_mnist": load_mnist_like,
    "cifar10": load_cifar_named,
    "cifar100": load_cifar_named,
    "npz": lambda cfg, progress: load_npz(cfg.path),
    "idx": lambda cfg, progress: load_idx_folder(cfg.path),
    "image_folder": load_image_folder,
    "tfrecord": lambda cfg, progress: _decoded_stream(cfg, progress),
    "tfds": lambda cfg, progress: _decoded_stream(cfg, progress),
}


def _decoded_stream(cfg: DatasetConfig, progress: ProgressCallback | None) -> Dataset:
    """tfrecord and tfds in memory: the streamed reader, decoded whole (engine/datasets/loading.py)."""
    from gui_app.engine.datasets.stream_read import load_into_memory
    from gui_app.engine.datasets.streamed import open_stream

    return load_into_memory(open_stream(cfg, progress))


def load_dataset(cfg: DatasetConfig, progress: ProgressCallback | None = None) -> Dataset:
    if cfg.name not in _LOADERS:
        raise DatasetError(f"dataset.name: unknown dataset {cfg.name!r}")
    try:
        return _LOADERS[cfg.name](cfg, progress)
    except OSError as exc:  # unreadable files, permissions, a full disk: still one line
        where = exc.filename or cfg.path or cfg.name
        raise DatasetError(f"{where}: {exc.strerror or exc}") from None
    except MemoryError:
        raise DatasetError(f"{cfg.path or cfg.name}: the dataset does not fit in memory") from None
