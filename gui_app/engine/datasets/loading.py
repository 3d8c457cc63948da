"""``dataset.loading``: decode the whole set into memory, or stream it from its files.

``auto`` streams when the decoded set (examples x height x width x channels bytes) would
exceed the memory budget: ``dataset.memory_budget_mb``, else ``$REPLICA_STUDIO_MEMORY_BUDGET_MB``,
else 25 % of the machine's RAM. Only image folders, TFRecord shards and TFDS sets can stream;
the array formats (npz, IDX, CIFAR batches) are read whole (``replica-studio prepare`` turns
them into shards). The budget itself is in ``gui_app.core.memory`` (the form shows it).
"""
from __future__ import annotations

from gui_app.core.config import DatasetConfig
from gui_app.core.memory import budget_bytes
from gui_app.engine.datasets.base import Dataset, ProgressCallback
from gui_app.engine.datasets.streamed import OPENERS, StreamSource, open_stream


def memory_budget_bytes(cfg: DatasetConfig) -> int:
    return budget_bytes(cfg.memory_budget_mb)


def decoded_bytes(source: StreamSource, parts: tuple[str, ...] = ("train", "val", "test")) -> int:
    h, w, c = source.input_shape
    seen, total = set(), 0
    for name in parts:
        part = getattr(source, name)
        if part is not None and id(part) not in seen:
            seen.add(id(part))
            total += part.examples
    return total * h * w * c


def resolve_cache(cfg: DatasetConfig, source: StreamSource) -> str:
    """``auto``: cache decoded examples in memory when what that holds fits the budget, else none.
    A memory cache holds the training examples and, between epochs, the validation ones
    (engine/training/streaming.py), so both count."""
    if cfg.cache != "auto":
        return cfg.cache
    return "memory" if decoded_bytes(source, ("train", "val")) <= memory_budget_bytes(cfg) else "none"


def open_input(cfg: DatasetConfig, progress: ProgressCallback | None = None) -> Dataset | StreamSource:
    """The set decoded into memory, or the StreamSource to stream it, as ``dataset.loading`` decides."""
    from gui_app.engine.datasets import load_dataset

    if cfg.loading == "memory" or (cfg.loading == "auto" and cfg.name not in OPENERS):
        return load_dataset(cfg, progress)
    source = open_stream(cfg, progress)
    # In memory the decoded set is held once, as uint8 (engine/training/pipeline.py): exactly this many bytes.
    if cfg.loading == "stream" or decoded_bytes(source) > memory_budget_bytes(cfg):
        return source
    if cfg.name == "image_folder":
        return load_dataset(cfg, progress)
    from gui_app.engine.datasets.stream_read import load_into_memory

    return load_into_memory(source)


class StreamPreview:
    """What ``replica-studio inspect`` shows of a set that would stream: the scan's summary and a
    bounded sample of decoded images (``x_train``/``y_train``), never the whole set."""

    def __init__(self, source: StreamSource, sample: int = 512) -> None:
        import numpy as np

        from gui_app.engine.datasets.stream_read import decoded

        self.source, self.warnings = source, list(source.warnings)
        self.input_shape, self.num_classes = source.input_shape, source.num_classes
        xs, ys = [], []
        for x, y in decoded(source, source.train, file_seed=20240601).take(sample).batch(sample).as_numpy_iterator():
            xs.append(x)
            ys.append(y)
        self.x_train = np.concatenate(xs) if xs else np.zeros((0, *source.input_shape), np.uint8)
        self.y_train = np.concatenate(ys).astype(np.int64) if ys else np.zeros(0, np.int64)

    def summary(self) -> dict:
        return self.source.summary()


def inspect_dataset(cfg: DatasetConfig) -> Dataset | StreamPreview:
    """The in-memory Dataset, or a StreamPreview when ``dataset.loading`` would stream."""
    opened = open_input(cfg)
    return StreamPreview(opened) if isinstance(opened, StreamSource) else opened
