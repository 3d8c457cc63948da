"""Reading streamed parts: the tf.data stages from files to decoded ``(uint8 image, label)``
elements, shared by training (``gui_app.engine.training.streaming``), ``prepare``, ``inspect``
and ``loading: memory`` for TFRecord and TFDS sets.

    list files -> shard (by file when there are at least as many files as input pipelines,
    else by example) -> seeded file-level shuffle -> interleaved parallel read -> parse ->
    parallel decode and resize

Every parallel stage is deterministic, so the same seed gives the same order.
"""
from __future__ import annotations

from gui_app.engine.datasets.streamed import Keep, Part, StreamSource

SAMPLE_FOR_STATS = 2048  # examples used for the normalization layer's mean and variance
READ_PARALLEL_FILES = 8
# Bytes: TensorFlow shares a NumPy buffer (DLPack, engine/training/pipeline.host_tensor) only at
# Eigen's largest alignment, and aborts on another; NumPy aligns to 16.
ALIGN = 64


def _keep_fn(tf, keep: tuple[Keep, ...]):
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

    from gui_app.engine.datasets import shards

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

    from gui_app.engine.datasets.images import decode_image_fn

    h, w, c = source.input_shape
    decode_bytes = decode_image_fn((h, w), c)
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


def host_array(shape: tuple[int, ...], dtype=None):
    """An uninitialised C-contiguous array whose buffer starts at an ``ALIGN``-byte boundary."""
    import numpy as np

    dtype = np.dtype(dtype or np.uint8)
    size = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(size + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start:start + size].view(dtype).reshape(shape)


def as_host_array(array):
    """``array`` itself when it is contiguous, writable and aligned, else an aligned copy."""
    if array.flags.c_contiguous and array.flags.writeable and array.ctypes.data % ALIGN == 0:
        return array
    out = host_array(array.shape, array.dtype)
    out[...] = array
    return out


def decode_into_memory(source: StreamSource, part: Part):
    """(images, labels) of ``part``, decoded straight into one aligned uint8 array of the part's
    size: no list of batches and no concatenation, which peaked at twice the decoded set. A record
    that fails to decode is dropped (the arrays are then a prefix of what was allocated)."""
    import numpy as np

    x = host_array((part.examples, *source.input_shape))
    y = np.empty(part.examples, np.int64)
    filled = 0
    for images, labels in decoded(source, part).batch(1024).as_numpy_iterator():
        n = min(len(labels), part.examples - filled)
        x[filled:filled + n], y[filled:filled + n] = images[:n], labels[:n]
        filled += n
    return x[:filled], y[:filled]


def load_into_memory(source: StreamSource):
    """Decode a streamable set into a ``Dataset`` (``loading: memory`` for tfrecord and tfds)."""
    from gui_app.engine.datasets.base import make_dataset

    pool = source.pool or source.train  # the in-memory input holds out validation again (pipeline.validation_rows)
    x, y = decode_into_memory(source, pool)
    x_test, y_test = decode_into_memory(source, source.test)
    return make_dataset(source.name, source.name, x, y, x_test, y_test, source.class_names, source.warnings)
