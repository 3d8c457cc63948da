"""Streamed input pipelines, built the way TensorFlow's input guides build them:

    list files -> shard (by file when there are at least as many files as input pipelines,
    else by example) -> seeded file-level shuffle -> interleaved parallel read -> seeded
    shuffle buffer -> skip to the resume position -> parallel decode and resize ->
    per-replica batch -> prefetch

``train_dataset_fn`` returns the ``dataset_fn(input_context)`` that
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

from gui_app.core.datasets.streamed import Part, StreamSource

SAMPLE_FOR_STATS = 2048  # examples used for the normalization layer's mean and variance
# The shuffle buffer holds encoded records (or decoded images with a cache): bound its memory,
# or 10,000 ImageNet JPEGs would take 1.1 GB.
SHUFFLE_BUFFER_BYTES = 256 * 2**20
READ_PARALLEL_FILES = 8


def epoch_seed(seed: int, epoch: int, salt: int = 0) -> int:
    digest = hashlib.sha256(f"{seed}/{epoch}/{salt}".encode()).digest()
    return int.from_bytes(digest[:7], "little")


def _options(tf):
    options = tf.data.Options()
    # Sharding is explicit (input_context); AUTO would read everything on every worker.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.deterministic = True
    return options


def _keep_fn(tf, keep: tuple):
    def keep_fn(index):
        ok = tf.constant(True)
        for prime, threshold, wanted in keep:
            hit = tf.math.floormod(index * prime, 1000) < threshold
            ok = tf.logical_and(ok, hit if wanted else tf.logical_not(hit))
        return ok
    return keep_fn


def raw_elements(source: StreamSource, part: Part, n_pipes: int, pipe_id: int, file_seed: int | None):
    """(payload, label) of this pipeline's share of ``part``, before decoding: encoded bytes
    for records and files, decoded images for TFDS."""
    import numpy as np
    import tensorflow as tf

    from gui_app.core.datasets import shards

    if part.kind == "files":
        ds = tf.data.Dataset.from_tensor_slices((part.files, part.labels.astype(np.int32)))
        if n_pipes > 1:
            ds = ds.shard(n_pipes, pipe_id)
        if file_seed is not None:  # every element is a file: a full shuffle of the list
            ds = ds.shuffle(len(part.files), seed=file_seed, reshuffle_each_iteration=False)
        return ds.map(lambda p, y: (tf.io.read_file(p), y), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if part.kind == "tfds":
        return _tfds_elements(tf, source, part, n_pipes, pipe_id, file_seed)
    by_file = len(part.files) >= n_pipes
    files = tf.data.Dataset.from_tensor_slices((part.files, np.asarray(part.offsets, np.int64)))
    if by_file and n_pipes > 1:
        files = files.shard(n_pipes, pipe_id)
    if file_seed is not None:
        files = files.shuffle(len(part.files), seed=file_seed, reshuffle_each_iteration=False)

    def read(path, offset):  # each record with its global index, for the hashed splits
        index = tf.data.Dataset.range(offset, np.iinfo(np.int64).max)
        return tf.data.Dataset.zip((index, tf.data.TFRecordDataset(path, buffer_size=1 << 20)))

    records = files.interleave(read, cycle_length=min(READ_PARALLEL_FILES, len(part.files)),
                               num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if part.keep:
        keep = _keep_fn(tf, part.keep)
        records = records.filter(lambda i, r: keep(i))
    if not by_file and n_pipes > 1:
        records = records.shard(n_pipes, pipe_id)
    offset = source.label_offset
    return records.map(lambda i, r: shards.parse_record(r, offset), num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=True)


def _tfds_elements(tf, source, part, n_pipes, pipe_id, file_seed):
    import tensorflow_datasets as tfds

    def load(input_context):
        config = tfds.ReadConfig(shuffle_seed=file_seed, input_context=input_context)
        return source.tfds_builder.as_dataset(split=part.tfds_split, shuffle_files=file_seed is not None,
                                              read_config=config, as_supervised=True)

    if n_pipes > 1:
        try:  # by file, when the split has at least as many files as pipelines
            ds = load(tf.distribute.InputContext(n_pipes, pipe_id, n_pipes))
        except ValueError:
            ds = load(None).shard(n_pipes, pipe_id)
    else:
        ds = load(None)
    return ds.map(lambda x, y: (x, tf.cast(y, tf.int32)))


def decode_fn(source: StreamSource):
    """(payload, label) -> ((H, W, C) uint8, label) at the configured size and channels."""
    import tensorflow as tf

    from gui_app.core.datasets.images import _decode_fn

    h, w, c = source.input_shape
    decode_bytes = _decode_fn(tf, (h, w), c)
    if source.name != "tfds":
        return lambda data, y: (decode_bytes(data), y)

    def fit(image, y):  # TFDS images arrive decoded: only channels and size change
        have = image.shape[-1]
        if have != c:
            image = tf.image.grayscale_to_rgb(image) if c == 3 else tf.image.rgb_to_grayscale(image[..., :3])
        image = tf.image.resize(image, (h, w), method="bilinear", antialias=True)
        return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8), y
    return fit


def decoded(source: StreamSource, part: Part, n_pipes: int = 1, pipe_id: int = 0, file_seed: int | None = None):
    import tensorflow as tf

    ds = raw_elements(source, part, n_pipes, pipe_id, file_seed)
    ds = ds.map(decode_fn(source), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    # A file that passed the header check but fails to decode is dropped, not fatal mid-epoch.
    return ds.ignore_errors()


class TrainStream:
    """The training input of one run; holds the warmed caches between epochs."""

    def __init__(self, source: StreamSource, global_batch: int, seed: int, shuffle_buffer: int,
                 cache: str = "none", cache_dir: Path | None = None):
        self.source, self.global_batch, self.seed = source, global_batch, seed
        self.shuffle_buffer, self.cache, self.cache_dir = shuffle_buffer, cache, cache_dir
        self._cached: dict[tuple[int, int], object] = {}

    def _cached_base(self, n_pipes: int, pipe_id: int):
        import tensorflow as tf

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
            for x, y in decoded(self.source, self.source.train, n_pipes, pipe_id).batch(1024):
                xs.append(x)
                ys.append(y)
            h, w, c = self.source.input_shape
            x = tf.concat(xs, 0) if xs else tf.zeros((0, h, w, c), tf.uint8)
            y = tf.concat(ys, 0) if ys else tf.zeros((0,), tf.int32)
            del xs, ys  # the batches: the peak while reading is twice the decoded share
            self._cached[key] = (x, y, int(np.asarray(y.shape[0])))
        return self._cached[key]

    def _gathered(self, n_pipes: int, pipe_id: int, epoch: int, skip: int, per_replica: int):
        import numpy as np
        import tensorflow as tf

        x, y, count = self._memory_arrays(n_pipes, pipe_id)
        if count == 0:
            raise ValueError("dataset: this input pipeline's share of the training set is empty")
        rng = np.random.default_rng([self.seed, epoch, pipe_id])
        # Two permutations back to back: a share shorter than the others wraps around instead of ending.
        order = np.concatenate([rng.permutation(count), rng.permutation(count)])[skip % count:]
        order = order[: len(order) // per_replica * per_replica].reshape(-1, per_replica)
        ds = tf.data.Dataset.from_tensor_slices(order).repeat()
        return ds.map(lambda i: (tf.gather(x, i), tf.gather(y, i)), num_parallel_calls=tf.data.AUTOTUNE,
                      deterministic=True)

    def buffer_size(self) -> int:
        """Examples in the shuffle buffer: ``dataset.shuffle_buffer``, at most SHUFFLE_BUFFER_BYTES.
        Uncached image files need none: their file list is already shuffled whole."""
        part = self.source.train
        if self.cache == "none" and part.kind == "files":
            return 1
        h, w, c = self.source.input_shape
        per = h * w * c if self.cache != "none" or part.kind == "tfds" else max(part.bytes_per_example, 1.0)
        return int(max(1, min(self.shuffle_buffer, SHUFFLE_BUFFER_BYTES // per)))

    def dataset_fn(self, epoch: int, start_batch: int):
        """``dataset_fn(input_context)`` for one epoch, starting at global batch ``start_batch``."""
        import tensorflow as tf

        def dataset_fn(input_context):
            n, pid = input_context.num_input_pipelines, input_context.input_pipeline_id
            per_replica = input_context.get_per_replica_batch_size(self.global_batch)
            replicas_here = max(1, input_context.num_replicas_in_sync // n)
            skip = start_batch * per_replica * replicas_here
            if self.cache == "memory":
                ds = self._gathered(n, pid, epoch, skip, per_replica)
            else:
                if self.cache == "file":
                    ds = self._cached_base(n, pid)
                else:
                    ds = raw_elements(self.source, self.source.train, n, pid, epoch_seed(self.seed, epoch, 1))
                buffer = self.buffer_size()
                if buffer > 1:
                    ds = ds.shuffle(buffer, seed=epoch_seed(self.seed, epoch, 2), reshuffle_each_iteration=True)
                ds = ds.repeat().skip(skip)
                if self.cache == "none":
                    ds = ds.map(decode_fn(self.source), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
                    ds = ds.ignore_errors()
                ds = ds.batch(per_replica, drop_remainder=True)
            ds = ds.map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, y), num_parallel_calls=tf.data.AUTOTUNE)
            return ds.prefetch(tf.data.AUTOTUNE).with_options(_options(tf))
        return dataset_fn

    def distribute(self, strategy, epoch: int, start_batch: int):
        return strategy.distribute_datasets_from_function(self.dataset_fn(epoch, start_batch))


def eval_dataset(source: StreamSource, part: Part, global_batch: int, cache: bool = False):
    """Every example of ``part`` once, in a fixed order, with its index (pipeline.eval_dataset's shape)."""
    import tensorflow as tf

    ds = decoded(source, part).enumerate().map(lambda i, xy: (xy[0], xy[1], i))
    if cache:
        ds = ds.cache()
    ds = ds.batch(global_batch).map(lambda x, y, i: (tf.cast(x, tf.float32) / 255.0, y, i),
                                    num_parallel_calls=tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = True
    return ds.prefetch(tf.data.AUTOTUNE).with_options(options)


def images_at(source: StreamSource, part: Part, indices):
    """The decoded uint8 images and labels at ``indices`` of ``part`` (one pass, for misclassified.npz)."""
    import numpy as np

    wanted = set(int(i) for i in indices)
    found: dict[int, tuple] = {}
    for i, (x, y) in enumerate(decoded(source, part).as_numpy_iterator()):
        if i in wanted:
            found[i] = (x, y)
            if len(found) == len(wanted):
                break
    h, w, c = source.input_shape
    xs = [found[i][0] for i in sorted(wanted) if i in found]
    return np.stack(xs) if xs else np.zeros((0, h, w, c), np.uint8)


def sample_images(source: StreamSource, n: int = SAMPLE_FOR_STATS, seed: int = 20240601):
    """A bounded, seeded sample of the training stream (uint8), for normalization statistics."""
    import numpy as np
    import tensorflow as tf

    ds = raw_elements(source, source.train, 1, 0, seed).shuffle(min(10 * n, 50_000), seed=seed).take(n)
    ds = ds.map(decode_fn(source), num_parallel_calls=tf.data.AUTOTUNE).ignore_errors()
    xs = [x for x, _ in ds.batch(256).as_numpy_iterator()]
    return np.concatenate(xs) if xs else np.zeros((0, *source.input_shape), np.uint8)


def load_into_memory(source: StreamSource):
    """Decode a streamable set into a ``Dataset`` (``loading: memory`` for tfrecord and tfds)."""
    import numpy as np

    from gui_app.core.datasets.base import make_dataset

    def arrays(part: Part):
        xs, ys = [], []
        for x, y in decoded(source, part).batch(1024).as_numpy_iterator():
            xs.append(x)
            ys.append(y)
        return np.concatenate(xs), np.concatenate(ys).astype(np.int64)

    pool = source.pool or source.train  # pipeline.split holds out validation again in memory
    x, y = arrays(pool)
    x_test, y_test = arrays(source.test)
    return make_dataset(source.name, source.name, x, y, x_test, y_test, source.class_names, source.warnings)
