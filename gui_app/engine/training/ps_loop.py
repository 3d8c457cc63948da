"""Training under ParameterServerStrategy with a ClusterCoordinator (docs/architecture.md, "TensorFlow and Keras facts":
Keras's ``fit`` does not work there; TensorFlow's own custom-loop shape does).

The coordinator ``schedule``s step functions; any free worker runs one, reading its own
per-worker dataset (an input source's ``per_worker``, which must ``repeat``: an epoch is an
explicit number of steps) and updating the variables on the parameter servers. Steps are asynchronous, so the statistics
are per *worker* (each step is run by exactly one). When a worker dies, the coordinator
reschedules its pending steps on the others; a step may then run twice (TensorFlow's
at-least-once rule), which for SGD is one extra update, not a wrong one.
"""
from __future__ import annotations

import numpy as np

from gui_app.engine.training.loop import STATS, Trainer

# Each scheduled step returns [STATS + worker index].
WORKER = len(STATS)


def variable_partitioner(tf, num_ps: int):
    """Shard big variables over the parameter servers (at least 256 KiB per shard)."""
    if num_ps < 2:
        return None
    return tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes=256 << 10, max_shards=num_ps)


def build_parameter_server(num_ps: int):
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        resolver, variable_partitioner=variable_partitioner(tf, num_ps))
    return strategy, tf.distribute.coordinator.ClusterCoordinator(strategy)


def worker_ids(coordinator):
    """A PerWorkerValues holding each worker's index, so a step can say who ran it. Uses the
    coordinator's worker list (TF 2.21); None if that changed."""
    import tensorflow as tf

    try:
        workers = coordinator._cluster.workers  # private: TensorFlow has no public per-worker constant
        # A tf.function, so that the RemoteValue has a type spec and can be a scheduled function's input.
        values = [w.create_resource(tf.function(lambda i=i: tf.constant(float(i)))) for i, w in enumerate(workers)]
        return tf.distribute.experimental.coordinator.PerWorkerValues(tuple(values))
    except (AttributeError, TypeError, AssertionError):
        return None


class PSTrainer(Trainer):
    """The replica step of :class:`Trainer`, scheduled one step at a time on free workers."""

    def __init__(self, strategy, coordinator, model, optimizer, global_batch_size: int, from_logits: bool = True):
        import tensorflow as tf

        super().__init__(strategy, model, optimizer, global_batch_size, from_logits)
        self.coordinator = coordinator
        self._ids = worker_ids(coordinator)
        self._step_fn = tf.function(self._worker_step)

    def _worker_step(self, iterator, worker_id):
        import tensorflow as tf

        x, y = next(iterator)
        stats = self.strategy.run(self._replica_step, args=(x, y))  # [1, STATS]
        return tf.concat([stats[0], tf.reshape(worker_id, [1])], axis=0)

    def train(self, iterator, k: int) -> np.ndarray:
        """Schedule ``k`` steps, wait for them; ``[k, STATS + 1]`` in the order they were scheduled."""
        import tensorflow as tf

        ids = self._ids if self._ids is not None else tf.constant(-1.0)
        remote = [self.coordinator.schedule(self._step_fn, args=(iterator, ids)) for _ in range(k)]
        self.coordinator.join()
        return np.stack([np.asarray(r.fetch()) for r in remote])
