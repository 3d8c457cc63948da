"""The distributed training step (design.md section 3).

One ``tf.function`` call runs K steps of ``strategy.run(replica_step)`` and returns, for every
step and every replica, the replica's *local* statistics stacked as a ``[K, replicas, STATS]``
tensor: per-step granularity without a host round trip per step, and per-replica values that
Keras's ``fit`` averages away before any callback sees them.
"""
from __future__ import annotations

import numpy as np

# Columns of the per-replica statistics tensor.
STATS = ("loss", "accuracy", "examples", "grad_norm", "step_time")
LOSS, ACCURACY, EXAMPLES, GRAD_NORM, STEP_TIME = range(len(STATS))


class Trainer:
    """Owns the compiled multi-step train function of one model under one strategy."""

    def __init__(self, strategy, model, optimizer, global_batch_size: int, from_logits: bool = True):
        import keras
        import tensorflow as tf

        self.strategy, self.model, self.optimizer = strategy, model, optimizer
        self.global_batch_size = global_batch_size
        self._loss = keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits, reduction=None)
        self._scaled = isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer)
        with strategy.scope():
            # Build the optimizer's slots now: creating them inside strategy.run fails for
            # Adam and friends in Keras 3.15 (design.md section 4, keras-team/keras#23085).
            if not optimizer.built:  # the engine builds it earlier, before restoring a checkpoint
                optimizer.build(model.trainable_variables)
        self._train_k = tf.function(self._train_k_impl)

    def _replica_step(self, x, y):
        import tensorflow as tf

        # Time the local forward and backward pass: t0 after the batch arrives and before the
        # model may start (the identity waits for t0), t1 after the last local gradient.
        with tf.control_dependencies([x]):
            t0 = tf.timestamp()
        with tf.control_dependencies([t0]):
            x = tf.identity(x)
        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            per_example = self._loss(y, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=self.global_batch_size)
            if self.model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(self.model.losses))
            target = self.optimizer.scale_loss(loss) if self._scaled else loss
        grads = tape.gradient(target, self.model.trainable_variables)
        with tf.control_dependencies(grads):
            t1 = tf.timestamp()
        local = tf.cast(tf.shape(y)[0], tf.float32)
        # The gradients are of (local sum / global batch); rescale to the local mean's gradient.
        grad_norm = tf.linalg.global_norm(grads) * (self.global_batch_size / local)
        if self._scaled:
            grad_norm /= tf.cast(self.optimizer.dynamic_scale, tf.float32)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        correct = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), tf.cast(y, tf.int32))
        stats = tf.stack([
            tf.reduce_mean(tf.cast(per_example, tf.float32)),
            tf.reduce_mean(tf.cast(correct, tf.float32)),
            local,
            tf.cast(grad_norm, tf.float32),
            tf.cast(t1 - t0, tf.float32),
        ])
        return stats[tf.newaxis]  # [1, STATS] so that gather stacks replicas on axis 0

    def _train_k_impl(self, iterator, k):
        import tensorflow as tf

        steps = tf.TensorArray(tf.float32, size=k)
        waits = tf.TensorArray(tf.float32, size=k)
        done = tf.timestamp()
        for i in tf.range(k):
            # Input wait: how long get_next blocks, timed outside the replica function. t0 waits
            # for the previous step's statistics, so the next fetch cannot hide behind compute.
            with tf.control_dependencies([done]):
                t0 = tf.timestamp()
            with tf.control_dependencies([t0]):
                batch = next(iterator)
            local = [t for v in tf.nest.flatten(batch) for t in self.strategy.experimental_local_results(v)]
            with tf.control_dependencies(local):
                t1 = tf.timestamp()
            per_replica = self.strategy.run(self._replica_step, args=batch)
            gathered = self.strategy.gather(per_replica, axis=0)
            steps = steps.write(i, gathered)
            waits = waits.write(i, tf.cast(t1 - t0, tf.float32))
            with tf.control_dependencies([gathered]):
                done = tf.timestamp()
        return steps.stack(), waits.stack()

    def train(self, iterator, k: int) -> np.ndarray:
        """Run ``k`` steps; return their per-replica statistics, shape ``[k, replicas, STATS]``.
        ``last_input_wait`` then holds the seconds each step waited for its batch, ``[k]``."""
        import tensorflow as tf

        stats, waits = self._train_k(iterator, tf.constant(k, tf.int32))
        self.last_input_wait = waits.numpy()
        return stats.numpy()


def summarize_step(stats: np.ndarray) -> tuple[float, float]:
    """Global loss and accuracy of one step from its ``[replicas, STATS]`` rows, weighting each
    replica by its example count."""
    n = stats[:, EXAMPLES]
    total = float(n.sum()) or 1.0
    return float((stats[:, LOSS] * n).sum() / total), float((stats[:, ACCURACY] * n).sum() / total)
