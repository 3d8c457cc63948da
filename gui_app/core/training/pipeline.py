"""tf.data input pipelines for training, validation and test.

The training order is a seeded NumPy permutation per epoch rather than ``Dataset.shuffle``:
a checkpoint then pins the data position exactly (epoch, batch), so a stopped run resumes on
the very batch it would have seen next and a resumed seeded run matches an uninterrupted one.
The arrays are already in memory, so there is nothing for ``Dataset.cache`` to save.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gui_app.core.config import DatasetConfig


@dataclass
class Splits:
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray | None
    y_val: np.ndarray | None
    x_test: np.ndarray
    y_test: np.ndarray


def split(dataset, cfg: DatasetConfig) -> Splits:
    """Hold out ``validation_split`` of the training set or use the test set to validate.

    The held-out examples depend only on the dataset and the fraction, not on the training
    seed, so runs that differ in anything else are validated on the same examples."""
    x, y = dataset.x_train, dataset.y_train
    x_val = y_val = None
    if cfg.validation == "split":
        order = np.random.default_rng(20240607).permutation(len(x))
        n_val = max(1, int(round(len(x) * cfg.validation_split)))
        if n_val >= len(x):
            raise ValueError(f"dataset.validation_split: leaves no training examples out of {len(x)}")
        val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])
        x, y, x_val, y_val = x[train_idx], y[train_idx], x[val_idx], y[val_idx]
    elif cfg.validation == "test":
        x_val, y_val = dataset.x_test, dataset.y_test
    return Splits(x, y, x_val, y_val, dataset.x_test, dataset.y_test)


def _options(tf):
    options = tf.data.Options()
    # Explicit, so TensorFlow does not warn about AUTO; DATA shards by element across workers.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = True
    return options


def _scale(x):
    import tensorflow as tf

    return tf.cast(x, tf.float32) / 255.0


def epoch_order(num_examples: int, epoch: int, seed: int) -> np.ndarray:
    """The example order of one (0-based) epoch; the same for the same seed on every machine."""
    return np.random.default_rng([seed, epoch]).permutation(num_examples)


def train_dataset(x: np.ndarray, y: np.ndarray, epoch: int, start_batch: int, global_batch: int, seed: int):
    """Batches of one epoch starting at ``start_batch``; the last partial batch is dropped so
    every replica gets the same local batch size."""
    import tensorflow as tf

    order = epoch_order(len(x), epoch, seed)[start_batch * global_batch:]
    order = order[: len(order) // global_batch * global_batch]
    ds = tf.data.Dataset.from_tensor_slices((x[order], y[order].astype(np.int32)))
    ds = ds.batch(global_batch, drop_remainder=True).map(lambda a, b: (_scale(a), b),
                                                          num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(_options(tf))


def eval_dataset(x: np.ndarray, y: np.ndarray, global_batch: int):
    """Every example once, in order, with its index so predictions can be matched back."""
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((x, y.astype(np.int32), np.arange(len(x), dtype=np.int64)))
    ds = ds.batch(global_batch).map(lambda a, b, i: (_scale(a), b, i), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(_options(tf))


# ---- distributed input (one pipeline per worker) ---------------------------------------------
# ``strategy.distribute_datasets_from_function`` calls the function once per worker with an
# InputContext; each worker builds only its own shard, batched by the per-replica batch, and its
# local replicas take consecutive batches. The shard is by data, explicitly (never AUTO, which
# falls back to DATA and makes every worker read everything): worker w of W takes the elements
# w, w+W, w+2W, ... of the epoch's seeded order -- ``Dataset.shard(W, w)`` done on the NumPy
# index, so a worker embeds 1/W of the arrays in its graph. Then global step s still uses exactly
# the examples order[s*G:(s+1)*G] whatever the number of workers and replicas, and a resumed or
# restarted cluster continues on the very batch it would have seen next.


def _worker_options(tf):
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.deterministic = True
    return options


def _shard(indices: np.ndarray, input_context) -> np.ndarray:
    return indices[input_context.input_pipeline_id::input_context.num_input_pipelines]


def distribute_train(strategy, x: np.ndarray, y: np.ndarray, epoch: int, start_batch: int, global_batch: int,
                     seed: int):
    """The distributed training input of one epoch from ``start_batch``. A global batch that
    does not divide over the replicas keeps the older whole-batch split (one worker only)."""
    import tensorflow as tf

    if global_batch % strategy.num_replicas_in_sync:
        return strategy.experimental_distribute_dataset(train_dataset(x, y, epoch, start_batch, global_batch, seed))
    order = epoch_order(len(x), epoch, seed)[start_batch * global_batch:]
    order = order[: len(order) // global_batch * global_batch]

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(global_batch)
        idx = _shard(order, input_context)
        ds = tf.data.Dataset.from_tensor_slices((x[idx], y[idx].astype(np.int32)))
        ds = ds.batch(per_replica, drop_remainder=True).map(lambda a, b: (_scale(a), b),
                                                            num_parallel_calls=tf.data.AUTOTUNE)
        return ds.prefetch(tf.data.AUTOTUNE).with_options(_worker_options(tf))

    return strategy.distribute_datasets_from_function(dataset_fn)


def distribute_eval(strategy, x: np.ndarray, y: np.ndarray, global_batch: int):
    """Every example once with its index. The set is padded (index -1, masked out by the
    evaluator) to whole batches on every replica, so all workers run the same number of steps
    (a worker that ran out early would leave the others waiting in a collective)."""
    import tensorflow as tf

    replicas = strategy.num_replicas_in_sync
    batch = -(-global_batch // replicas) * replicas
    padded = -(-len(x) // batch) * batch
    index = np.arange(padded, dtype=np.int64)
    index[len(x):] = -1

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(batch)
        idx = _shard(index, input_context)
        rows = np.where(idx >= 0, idx, 0)
        ds = tf.data.Dataset.from_tensor_slices((x[rows], y[rows].astype(np.int32), idx))
        ds = ds.batch(per_replica, drop_remainder=True).map(lambda a, b, i: (_scale(a), b, i),
                                                            num_parallel_calls=tf.data.AUTOTUNE)
        return ds.prefetch(tf.data.AUTOTUNE).with_options(_worker_options(tf))

    return strategy.distribute_datasets_from_function(dataset_fn)
