"""Streamed training input, built the way TensorFlow's input guides build it (the reading
stages are in ``gui_app.engine.datasets.stream_read``):

    list files -> shard (by file when there are at least as many files as input pipelines,
    else by example) -> seeded file-level shuffle -> interleaved parallel read -> seeded
    shuffle buffer -> skip to the resume position -> parallel decode and resize ->
    per-replica batch -> prefetch

:class:`StreamedInput` is the streamed :class:`~gui_app.engine.training.inputs.InputSource`;
``TrainStream.dataset_fn`` returns the ``dataset_fn(input_context)`` that
``strategy.distribute_datasets_from_function`` calls once per input pipeline.

Exact resume: the order of an epoch depends only on (seed, epoch, the number of input
pipelines): the file order and the shuffle buffer are seeded with both, parallel stages are
deterministic. A checkpoint pins (epoch, batch); the resumed pipeline rebuilds the same
epoch and skips the encoded records already trained on (skipping happens before decoding, so
it costs reading, not decoding). Each epoch's stream is repeated, so a pipeline whose shard
is shorter than the others (or loses a record that fails to decode) wraps around instead of
ending the epoch early; the wrapped examples are the only ones seen twice in that epoch.

Cache (``dataset.cache``), filled by one full pass before the first step: ``memory`` decodes
this pipeline's share into two tensors and gathers each batch by index from a seeded
permutation per (seed, epoch, pipeline), a full shuffle at in-memory speed; ``file`` uses a
tf.data file cache in the run's data folder, then the seeded shuffle buffer (a tf.data cache
is only kept once read to the end, and the training loop stops each epoch mid-stream, hence
the warming pass).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from gui_app.core.config import DatasetConfig
from gui_app.engine.datasets.stream_read import decode_fn, decoded, images_at, raw_elements, sample_images
from gui_app.engine.datasets.streamed import Part, StreamSource

# The shuffle buffer holds encoded records (or decoded images with a cache): bound its memory,
# or 10,000 ImageNet JPEGs would take 1.1 GB.
SHUFFLE_BUFFER_BYTES = 256 * 2**20


def epoch_seed(seed: int, epoch: int, salt: int = 0) -> int:
    digest = hashlib.sha256(f"{seed}/{epoch}/{salt}".encode()).digest()
    return int.from_bytes(digest[:7], "little")


def _options(tf):
    options = tf.data.Options()
    # Sharding is explicit (input_context); AUTO would read everything on every worker.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.deterministic = True
    return options


class TrainStream:
    """The training input of one run; holds the warmed caches between epochs."""

    def __init__(self, source: StreamSource, global_batch: int, shuffle_buffer: int, cache: str, cache_dir: Path):
        self.source, self.global_batch = source, global_batch
        self.shuffle_buffer, self.cache, self.cache_dir = shuffle_buffer, cache, cache_dir
        self._cached: dict[tuple[int, int], object] = {}

    def _cached_base(self, n_pipes: int, pipe_id: int):

        key = (n_pipes, pipe_id)
        if key not in self._cached:
            filename = ""
            if self.cache == "file":
                self.cache_dir.mkdir(parents=True, exist_ok=True)
                filename = str(self.cache_dir / f"train-cache-{pipe_id}-of-{n_pipes}")
                # One engine process per run: a lock left by a killed process is stale, and
                # tf.data would refuse the cache as "concurrently" written.
                for stale in self.cache_dir.glob(f"train-cache-{pipe_id}-of-{n_pipes}*.lockfile"):
                    stale.unlink(missing_ok=True)
            base = decoded(self.source, self.source.train, n_pipes, pipe_id).cache(filename)
            base.batch(1024).reduce(0, lambda s, _: s + 1)  # warm: a cache is kept only when read to the end
            self._cached[key] = base
        return self._cached[key]

    def _memory_arrays(self, n_pipes: int, pipe_id: int):
        """This pipeline's decoded examples as two tensors, read once (``cache: memory``).

        Batches are then gathered by index from a seeded permutation per epoch (the in-memory
        pipeline's design): a full shuffle, and no per-example tf.data work, which made a
        tf.data memory cache plus a shuffle buffer 15 % slower than the in-memory path."""
        import numpy as np
        import tensorflow as tf

        key = (n_pipes, pipe_id)
        if key not in self._cached:
            xs, ys = [], []
            with tf.device("/cpu:0"):  # host memory, whatever device trains
                for x, y in decoded(self.source, self.source.train, n_pipes, pipe_id).batch(1024):
                    xs.append(x)
                    ys.append(y)
                h, w, c = self.source.input_shape
                x = tf.concat(xs, 0) if xs else tf.zeros((0, h, w, c), tf.uint8)
                y = tf.concat(ys, 0) if ys else tf.zeros((0,), tf.int32)
            del xs, ys  # the batches: the peak while reading is twice the decoded share
            self._cached[key] = (x, y, int(np.asarray(y.shape[0])))
        return self._cached[key]

    def _gathered(self, n_pipes: int, pipe_id: int, epoch: int, skip: int, per_replica: int, seed: int):
        import numpy as np
        import tensorflow as tf

        x, y, count = self._memory_arrays(n_pipes, pipe_id)
        if count == 0:
            raise ValueError("dataset: this input pipeline's share of the training set is empty")
        rng = np.random.default_rng([seed, epoch, pipe_id])
        # Two permutations back to back: a share shorter than the others wraps around instead of ending.
        order = np.concatenate([rng.permutation(count), rng.permutation(count)])[skip % count:]
        order = order[: len(order) // per_replica * per_replica].reshape(-1, per_replica)
        ds = tf.data.Dataset.from_tensor_slices(order).repeat()
        ds = ds.map(lambda i: (tf.gather(x, i), tf.gather(y, i)), num_parallel_calls=tf.data.AUTOTUNE,
                    deterministic=True)
        # tf.data's default optimizations would serialize the dataset with the cache in it: a copy per
        # iterator (engine/training/pipeline.py).
        no_rewrites = tf.data.Options()
        no_rewrites.experimental_optimization.apply_default_optimizations = False
        return ds.with_options(no_rewrites)

    def buffer_size(self) -> int:
        """Examples in the shuffle buffer: ``dataset.shuffle_buffer``, at most SHUFFLE_BUFFER_BYTES.
        Uncached image files need none: their file list is already shuffled whole."""
        part = self.source.train
        if self.cache == "none" and part.kind == "files":
            return 1
        h, w, c = self.source.input_shape
        per = h * w * c if self.cache != "none" or part.kind == "tfds" else max(part.bytes_per_example, 1.0)
        return int(max(1, min(self.shuffle_buffer, SHUFFLE_BUFFER_BYTES // per)))

    def dataset_fn(self, epoch: int, start_batch: int, seed: int):
        """``dataset_fn(input_context)`` for one epoch in the order of ``seed``, starting at global
        batch ``start_batch``."""
        import tensorflow as tf

        def dataset_fn(input_context):
            n, pid = input_context.num_input_pipelines, input_context.input_pipeline_id
            per_replica = input_context.get_per_replica_batch_size(self.global_batch)
            replicas_here = max(1, input_context.num_replicas_in_sync // n)
            skip = start_batch * per_replica * replicas_here
            if self.cache == "memory":
                ds = self._gathered(n, pid, epoch, skip, per_replica, seed)
            else:
                if self.cache == "file":
                    ds = self._cached_base(n, pid)
                else:
                    ds = raw_elements(self.source, self.source.train, n, pid, epoch_seed(seed, epoch, 1))
                buffer = self.buffer_size()
                if buffer > 1:
                    ds = ds.shuffle(buffer, seed=epoch_seed(seed, epoch, 2), reshuffle_each_iteration=True)
                ds = ds.repeat().skip(skip)
                if self.cache == "none":
                    ds = ds.map(decode_fn(self.source), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
                    ds = ds.ignore_errors()
                ds = ds.batch(per_replica, drop_remainder=True)
            return ds.prefetch(tf.data.AUTOTUNE).with_options(_options(tf))  # uint8: the step scales (pipeline.py)
        return dataset_fn

    def distribute(self, strategy, epoch: int, start_batch: int, seed: int):
        return strategy.distribute_datasets_from_function(self.dataset_fn(epoch, start_batch, seed))


def eval_dataset(source: StreamSource, part: Part, global_batch: int, cache: bool = False):
    """Every example of ``part`` once, in a fixed order, with its index: (image, label, index),
    as ``pipeline.distribute_eval`` gives them."""
    import tensorflow as tf

    ds = decoded(source, part).enumerate().map(lambda i, xy: (xy[0], xy[1], i))
    if cache:
        ds = ds.cache()
    ds = ds.batch(global_batch)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = True
    return ds.prefetch(tf.data.AUTOTUNE).with_options(options)


class StreamedInput:
    """A set read from its files as it trains (``dataset.loading: stream``): the streamed
    :class:`~gui_app.engine.training.inputs.InputSource`."""

    def __init__(self, source: StreamSource, cfg: DatasetConfig, global_batch: int, cache_dir: Path):
        from gui_app.engine.datasets.loading import resolve_cache

        self.source = source
        self.name, self.class_names, self.input_shape = source.name, list(source.class_names), source.input_shape
        self.warnings = list(source.warnings)
        self._batch = global_batch
        self._cache = resolve_cache(cfg, source)
        self._stream = TrainStream(source, global_batch, cfg.shuffle_buffer, self._cache, cache_dir)
        self._validation = None  # with a memory cache, one dataset keeps its cache between epochs

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def train_examples(self) -> int:
        return self.source.train.examples

    @property
    def validation_examples(self) -> int:
        return self.source.val.examples if self.source.val else 0

    def summary(self) -> dict[str, Any]:
        return {**self.source.summary(), "train_examples": self.train_examples,
                "validation_examples": self.validation_examples}

    def train(self, strategy, epoch: int, start_batch: int, seed: int):
        return self._stream.distribute(strategy, epoch, start_batch, seed)

    def validation(self, strategy):
        if self.source.val is None:
            return None
        if self._cache != "memory":
            return eval_dataset(self.source, self.source.val, self._batch)
        if self._validation is None:
            self._validation = eval_dataset(self.source, self.source.val, self._batch, cache=True)
        return self._validation

    def test(self, strategy):
        return eval_dataset(self.source, self.source.test, self._batch)

    def per_worker(self, coordinator):
        source, batch, buffer = self.source, self._batch, self._stream.buffer_size()

        def dataset_fn():  # each worker its own unseeded order, endless (engine/training/ps_loop.py)
            ds = decoded(source, source.train).shuffle(max(buffer, batch)).repeat()
            return ds.batch(batch, drop_remainder=True).prefetch(2)

        return iter(coordinator.create_per_worker_dataset(dataset_fn))

    def normalization_stats(self) -> tuple:
        """From a bounded, seeded sample of the training stream (``stream_read.sample_images``)."""
        from gui_app.engine.training.models import channel_stats

        return channel_stats(sample_images(self.source))

    def test_images(self, indices):
        return images_at(self.source, self.source.test, indices)
