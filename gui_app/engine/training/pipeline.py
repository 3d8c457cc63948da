"""In-memory input pipelines: every batch gathered by index from a decoded set held once.

The set is one uint8 tensor in host memory that shares NumPy's buffer (:func:`host_tensor`,
through DLPack: no copy); a batch is ``tf.gather`` of its rows. Batches stay uint8 until the
replica's step scales them (:func:`to_unit_range`): a quarter of the bytes in the prefetch
buffers and on the way to a GPU. Only index arrays (8 bytes an example) are built per epoch.

The training order is a seeded NumPy permutation per epoch rather than ``Dataset.shuffle``:
a checkpoint then pins the data position exactly (epoch, batch), so a stopped run resumes on
the very batch it would have seen next and a resumed seeded run matches an uninterrupted one
(docs/architecture.md, "Decisions").

Memory, measured on 60,000 96x96x3 images (1.55 GiB decoded; docs/benchmarks.md, "In-memory
input"): the earlier pipeline copied the set for each epoch (``x[order]``) and again into the
dataset graph (``from_tensor_slices``), after the validation split had copied the training part:
the engine peaked 5.8x the decoded set above TensorFlow's own memory; now 1.2x. tf.data's default
graph optimizations serialize the dataset, and with it a captured tensor: the first iterator
made a full copy of the set (measured: +162 MB for a 147 MB set), so these pipelines run without
them (:func:`options`); every stage they would add (parallel gather, prefetch) is written out here.
"""
from __future__ import annotations

import numpy as np

from gui_app.core.config import DatasetConfig

VALIDATION_SEED = 20240607  # the held-out validation examples never move with the training seed


def validation_rows(count: int, cfg: DatasetConfig) -> tuple[np.ndarray, np.ndarray | None]:
    """(training rows, validation rows or None) of a pool of ``count`` examples, each sorted:
    ``validation: split`` holds out ``validation_split`` of them.

    The held-out examples depend only on the pool and the fraction, not on the training seed,
    so runs that differ in anything else are validated on the same examples."""
    rows = np.arange(count, dtype=np.int64)
    if cfg.validation != "split":
        return rows, None
    order = np.random.default_rng(VALIDATION_SEED).permutation(count)
    n_val = max(1, int(round(count * cfg.validation_split)))
    if n_val >= count:
        raise ValueError(f"dataset.validation_split: leaves no training examples out of {count}")
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def epoch_order(num_examples: int, epoch: int, seed: int) -> np.ndarray:
    """The example order of one (0-based) epoch; the same for the same seed on every machine."""
    return np.random.default_rng([seed, epoch]).permutation(num_examples)


def step_rows(rows: np.ndarray, epoch: int, batch: int, global_batch: int, seed: int) -> np.ndarray:
    """The examples (entries of ``rows``) that global batch ``batch`` of ``epoch`` trains on, in
    the order the replicas take them: :func:`distribute_train`'s order, recomputed on the host
    (the non-finite replay, engine/training/replay.py)."""
    return rows[epoch_order(len(rows), epoch, seed)][batch * global_batch:(batch + 1) * global_batch]


def replica_parts(examples: np.ndarray, replica_workers: list[int]) -> list[np.ndarray]:
    """The part of one global batch each replica gets (replica order), as :func:`distribute_train`
    deals it: worker w of W takes every W-th example from w, its local replicas consecutive
    slices of that. A batch that does not divide over the replicas is split whole (one worker)."""
    replicas, workers = len(replica_workers), max(replica_workers, default=0) + 1
    if len(examples) % replicas:
        return list(np.array_split(examples, replicas))
    local = len(examples) // replicas
    seen: dict[int, int] = {}
    parts = []
    for worker in replica_workers:
        k = seen[worker] = seen.get(worker, -1) + 1
        parts.append(examples[worker::workers][k * local:(k + 1) * local])
    return parts


def host_tensor(array: np.ndarray):
    """A CPU tensor on ``array``'s own memory (DLPack, no copy). ``array`` must come from
    ``stream_read.host_array``: TensorFlow adopts a buffer only at Eigen's alignment and aborts
    the process on another."""
    import tensorflow as tf

    from gui_app.engine.datasets.stream_read import ALIGN

    if not (array.flags.c_contiguous and array.flags.writeable and array.ctypes.data % ALIGN == 0):
        raise ValueError("host_tensor: the array is not a writable, contiguous, aligned host array")
    return tf.experimental.dlpack.from_dlpack(array.__dlpack__())


def to_unit_range(x):
    """Images as the models take them, inside the replica's step: uint8 0..255 become float32
    in [0, 1]; floats are taken as already scaled."""
    import tensorflow as tf

    return tf.cast(x, tf.float32) / 255.0 if x.dtype == tf.uint8 else x


def options(tf):
    options = tf.data.Options()
    # Sharding is explicit (shard() below); AUTO would fall back to DATA and read everything on every worker.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.deterministic = True
    options.experimental_optimization.apply_default_optimizations = False  # they copy the set (above)
    return options


def _batches(tf, images, labels, rows: np.ndarray, indices: np.ndarray | None = None):
    """The dataset of the batches whose rows are ``rows`` ([batches, batch] into ``images``),
    with the position of each example in its part when ``indices`` is given (evaluation)."""
    def fetch(r, *index):  # the rows' images and labels (and their positions, when given)
        return (tf.gather(images, r), tf.gather(labels, r), *index)

    ds = tf.data.Dataset.from_tensor_slices(rows if indices is None else (rows, indices))
    ds = ds.map(fetch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(options(tf))


# ---- distributed input (one pipeline per worker) ---------------------------------------------
# ``strategy.distribute_datasets_from_function`` calls the function once per worker with an
# InputContext; each worker gathers only its own shard, batched by the per-replica batch, and its
# local replicas take consecutive batches. The shard is by data, explicitly: worker w of W takes
# the elements w, w+W, w+2W, ... of the epoch's seeded order (``Dataset.shard(W, w)`` done on the
# NumPy index). Then global step s uses exactly the examples order[s*G:(s+1)*G] whatever the
# number of workers and replicas, and a resumed or restarted cluster continues on the very batch
# it would have seen next.


def shard(indices: np.ndarray, input_context) -> np.ndarray:
    return indices[input_context.input_pipeline_id::input_context.num_input_pipelines]


def distribute_train(strategy, images, labels, rows: np.ndarray, epoch: int, start_batch: int, global_batch: int,
                     seed: int):
    """The distributed training input of one epoch of the examples ``rows`` from ``start_batch``;
    the last partial batch is dropped so every replica gets the same local batch size. A global
    batch that does not divide over the replicas is split whole (one worker only)."""
    import tensorflow as tf

    order = rows[epoch_order(len(rows), epoch, seed)][start_batch * global_batch:]
    order = order[: len(order) // global_batch * global_batch]
    if global_batch % strategy.num_replicas_in_sync:
        return strategy.experimental_distribute_dataset(
            _batches(tf, images, labels, order.reshape(-1, global_batch)))

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(global_batch)
        mine = shard(order, input_context)
        return _batches(tf, images, labels, mine[: len(mine) // per_replica * per_replica].reshape(-1, per_replica))

    return strategy.distribute_datasets_from_function(dataset_fn)


def distribute_eval(strategy, images, labels, rows: np.ndarray, global_batch: int):
    """Every example of ``rows`` once, with its position in ``rows``. The set is padded (position
    -1, masked out by the evaluator) to whole batches on every replica, so all workers run the
    same number of steps (a worker that ran out early would leave the others waiting in a
    collective)."""
    import tensorflow as tf

    replicas = strategy.num_replicas_in_sync
    batch = -(-global_batch // replicas) * replicas
    padded = -(-len(rows) // batch) * batch
    index = np.arange(padded, dtype=np.int64)
    index[len(rows):] = -1

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(batch)
        mine = shard(index, input_context).reshape(-1, per_replica)
        return _batches(tf, images, labels, rows[np.maximum(mine, 0)], mine)

    return strategy.distribute_datasets_from_function(dataset_fn)


def per_worker_dataset(coordinator, images, labels, rows: np.ndarray, global_batch: int):
    """Parameter servers: each worker draws batches of ``rows`` in its own order, forever (the
    loop counts an epoch's steps). No fixed seed: with one, every worker would read the same order."""
    import tensorflow as tf

    def dataset_fn():
        ds = tf.data.Dataset.from_tensor_slices(rows).shuffle(len(rows), reshuffle_each_iteration=True).repeat()
        ds = ds.batch(global_batch, drop_remainder=True)
        ds = ds.map(lambda r: (tf.gather(images, r), tf.gather(labels, r)))
        return ds.prefetch(2).with_options(options(tf))

    return iter(coordinator.create_per_worker_dataset(dataset_fn))
