"""The engine's side of streamed input (``dataset.loading: stream``): the run controller asks
here for its training iterator, validation and test datasets, and the arrays it needs for
``misclassified.npz``, so its in-memory path stays as it was.

``StreamSplits`` has the fields of ``pipeline.Splits``; its ``x_*`` are sized stand-ins, so
code that only counts examples (``len``) or checks for a validation set (``is None``) works
for both paths; code that reads arrays branches on ``ctx.stream``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA_DIR = "data"  # the run's data folder: the training cache file of dataset.cache 'file'


class PartSize:
    """Stands in for an image array of a streamed part: ``len`` is its example count."""

    def __init__(self, part) -> None:
        self.part = part

    def __len__(self) -> int:
        return self.part.examples


@dataclass
class StreamSplits:
    x_train: PartSize
    y_train: None
    x_val: PartSize | None
    y_val: None
    x_test: PartSize
    y_test: None


def splits_for(source) -> StreamSplits:
    return StreamSplits(PartSize(source.train), None, PartSize(source.val) if source.val else None, None,
                        PartSize(source.test), None)


def stats_sample(ctx) -> np.ndarray:
    """Normalization statistics come from a bounded, seeded sample of the training stream."""
    from gui_app.core.training.streaming import sample_images

    return sample_images(ctx.stream)


def train_iterator(ctx, run_dir: Path, epoch: int, start_batch: int):
    from gui_app.core.datasets.loading import resolve_cache
    from gui_app.core.training.streaming import TrainStream

    cfg = ctx.config.dataset
    if getattr(ctx, "train_stream", None) is None or ctx.train_stream.seed != ctx.data_seed:
        ctx.train_stream = TrainStream(ctx.stream, ctx.config.training.global_batch_size, ctx.data_seed,
                                       cfg.shuffle_buffer, resolve_cache(cfg, ctx.stream), run_dir / DATA_DIR)
    return iter(ctx.train_stream.distribute(ctx.strategy, epoch, start_batch))


def eval_dataset(ctx, which: str):
    from gui_app.core.datasets.loading import resolve_cache
    from gui_app.core.training.streaming import eval_dataset as build

    part = getattr(ctx.stream, which)
    cache = which == "val" and resolve_cache(ctx.config.dataset, ctx.stream) == "memory"
    key = f"_eval_{which}"
    if cache and getattr(ctx, "eval_cache", None) is not None and key in ctx.eval_cache:
        return ctx.eval_cache[key]  # the same dataset object keeps its memory cache between epochs
    ds = build(ctx.stream, part, ctx.config.training.global_batch_size, cache=cache)
    if cache:
        ctx.eval_cache = {**(getattr(ctx, "eval_cache", None) or {}), key: ds}
    return ds


def test_examples(ctx, predictions: np.ndarray, keep: int):
    """(labels of the test set in order, images/labels/indices of the first ``keep`` wrong ones)."""
    from gui_app.core.training.streaming import images_at, raw_elements

    labels = np.concatenate([y for _, y in raw_elements(ctx.stream, ctx.stream.test, 1, 0, None)
                             .map(lambda a, b: (0, b)).batch(4096).as_numpy_iterator()]).astype(np.int64)
    labels = labels[: len(predictions)]
    wrong = np.flatnonzero(predictions != labels)[:keep]
    return labels, wrong, images_at(ctx.stream, ctx.stream.test, wrong)
