"""``dataset.loading``: decode the whole set into memory, or stream it from its files.

``auto`` streams when the decoded set (examples x height x width x channels bytes) would
exceed the memory budget: ``dataset.memory_budget_mb``, else ``$REPLICA_STUDIO_MEMORY_BUDGET_MB``,
else 25 % of the machine's RAM. Only image folders, TFRecord shards and TFDS sets can stream;
the array formats (npz, IDX, CIFAR batches) are read whole (``replica-studio prepare`` turns
them into shards).
"""
from __future__ import annotations

import os

from gui_app.core.config import DatasetConfig
from gui_app.core.datasets.base import Dataset, Progress

BUDGET_ENV = "REPLICA_STUDIO_MEMORY_BUDGET_MB"
BUDGET_FRACTION = 0.25


def ram_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # not POSIX
        try:
            import psutil

            return int(psutil.virtual_memory().total)
        except ImportError:
            return None


def memory_budget_bytes(cfg: DatasetConfig) -> int:
    if cfg.memory_budget_mb is not None:
        return cfg.memory_budget_mb * 2**20
    env = os.environ.get(BUDGET_ENV, "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env) * 2**20
    ram = ram_bytes()
    return int((ram or 8 * 2**30) * BUDGET_FRACTION)


def decoded_bytes(source, parts: tuple = ("train", "val", "test")) -> int:
    h, w, c = source.input_shape
    seen, total = set(), 0
    for name in parts:
        part = getattr(source, name)
        if part is not None and id(part) not in seen:
            seen.add(id(part))
            total += part.examples
    return total * h * w * c


def resolve_cache(cfg: DatasetConfig, source) -> str:
    """``auto``: cache decoded training examples in memory when they fit the budget, else none."""
    if cfg.cache != "auto":
        return cfg.cache
    return "memory" if decoded_bytes(source, ("train",)) <= memory_budget_bytes(cfg) else "none"


def open_input(cfg: DatasetConfig, progress: Progress | None = None) -> tuple[Dataset | None, object | None]:
    """(dataset in memory, None) or (None, StreamSource) as ``dataset.loading`` decides."""
    from gui_app.core.datasets import load_dataset
    from gui_app.core.datasets.streamed import OPENERS, open_stream

    if cfg.loading == "memory" or (cfg.loading == "auto" and cfg.name not in OPENERS):
        return load_dataset(cfg, progress), None
    source = open_stream(cfg, progress)
    if cfg.loading == "stream" or decoded_bytes(source) > memory_budget_bytes(cfg):
        return None, source
    if cfg.name == "image_folder":
        return load_dataset(cfg, progress), None
    from gui_app.core.training.streaming import load_into_memory

    return load_into_memory(source), None
