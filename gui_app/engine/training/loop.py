"""The distributed training step (docs/architecture.md, "The training loop").

One ``tf.function`` call runs K steps of ``strategy.run(replica_step)`` and returns, for every
step and every replica, the replica's *local* statistics stacked as a ``[K, replicas, STATS]``
tensor: per-step granularity without a host round trip per step, and per-replica values that
Keras's ``fit`` averages away before any callback sees them.
"""
from __future__ import annotations

import numpy as np

from gui_app.engine.training.pipeline import to_unit_range

# Columns of the per-replica statistics tensor.
# READY: seconds from the step's start on this worker until the local gradients were ready, its
# arrival at the all-reduce (-1: not measured, a parameter-server step).
STATS = ("loss", "accuracy", "examples", "grad_norm", "step_time", "ready")
LOSS, ACCURACY, EXAMPLES, GRAD_NORM, STEP_TIME, READY = range(len(STATS))


class Trainer:
    """Owns the compiled multi-step train function of one model under one strategy.

    ``accumulation_steps`` M > 1: each replica splits its share of the global batch into M
    micro-batches, sums their gradients and all-reduces once per optimizer step, so one step
    means what it means with M = 1 (same examples, loss scaling and update) at a micro-batch's
    activation memory. ``all_reduce_dtype`` "float16": the gradients are cast down for the
    all-reduce and back to the variables' dtype after it (half the bytes to move).
    ``fingerprints``: each replica also hashes the batch it trained on (:func:`batch_fingerprint`),
    ``last_batches`` after ``train``; off by default, so a run that does not ask pays nothing."""

    def __init__(self, strategy, model, optimizer, global_batch_size: int, from_logits: bool = True,
                 accumulation_steps: int = 1, all_reduce_dtype: str = "float32", fingerprints: bool = False):
        import keras
        import tensorflow as tf

        self.strategy, self.model, self.optimizer = strategy, model, optimizer
        self.global_batch_size = global_batch_size
        self.accumulation_steps = accumulation_steps
        self.fingerprints = fingerprints
        self.last_batches: np.ndarray | None = None  # [k, replicas] hex strings, with ``fingerprints``
        self._loss = keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits, reduction=None)
        self._scaled = isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer)
        self._reduce_dtype = None if all_reduce_dtype == "float32" else tf.as_dtype(all_reduce_dtype)
        if self._reduce_dtype is not None:
            # We all-reduce ourselves (in float16): the optimizer must not reduce a second time,
            # which would double the communication this option is meant to cut.
            without_optimizer_all_reduce(optimizer)
        with strategy.scope():
            # Build the optimizer's slots now: creating them inside strategy.run fails for
            # Adam and friends in Keras 3.15 (docs/architecture.md, "TensorFlow and Keras facts").
            if not optimizer.built:  # the engine builds it earlier, before restoring a checkpoint
                optimizer.build(model.trainable_variables)
        self._train_k = tf.function(self._train_k_impl)

    def _forward_backward(self, x, y, micro_batches=None):
        """Gradients of (this batch's loss sum / global batch), the per-example losses and the
        correct predictions. With ``micro_batches`` m, each micro-batch adds 1/m of the
        regularisation loss, so that the m of them sum to the step's one."""
        import tensorflow as tf

        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            per_example = self._loss(y, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=self.global_batch_size)
            if self.model.losses:
                regularization = tf.nn.scale_regularization_loss(tf.add_n(self.model.losses))
                if micro_batches is not None:
                    regularization /= tf.cast(micro_batches, regularization.dtype)
                loss += regularization
            target = self.optimizer.scale_loss(loss) if self._scaled else loss
        grads = tape.gradient(target, self.model.trainable_variables)
        correct = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), tf.cast(y, tf.int32))
        return grads, per_example, correct

    def _accumulate(self, x, y):
        """The local gradients of the whole local batch, summed over m = min(M, local) contiguous
        micro-batches (sizes differ by at most one, none is empty); the mean loss and accuracy."""
        import tensorflow as tf

        n = tf.shape(y)[0]
        m = tf.maximum(tf.minimum(tf.constant(self.accumulation_steps, tf.int32), n), 1)

        def micro(i):
            lo, hi = i * n // m, (i + 1) * n // m
            grads, per_example, correct = self._forward_backward(x[lo:hi], y[lo:hi], m)
            return (grads, tf.reduce_sum(tf.cast(per_example, tf.float32)),
                    tf.reduce_sum(tf.cast(correct, tf.float32)))

        # The first micro-batch outside the loop: it fixes which variables have a gradient (None
        # stays None) and the loop state's shapes. Sparse gradients (embeddings) are summed dense.
        grads, loss_sum, correct_sum = micro(tf.constant(0, tf.int32))
        present = [i for i, g in enumerate(grads) if g is not None]

        def body(i, loss_sum, correct_sum, total):
            g, loss_i, correct_i = micro(i)
            total = [t + tf.convert_to_tensor(g[j]) for t, j in zip(total, present)]
            return i + 1, loss_sum + loss_i, correct_sum + correct_i, total

        # parallel_iterations=1: one micro-batch at a time, or peak memory would be several of them.
        _, loss_sum, correct_sum, total = tf.while_loop(
            lambda i, *_: i < m, body,
            (tf.constant(1, tf.int32), loss_sum, correct_sum, [tf.convert_to_tensor(grads[j]) for j in present]),
            parallel_iterations=1)
        out = [None] * len(grads)
        for j, g in zip(present, total):
            out[j] = g
        local = tf.cast(n, tf.float32)
        return out, loss_sum / local, correct_sum / local

    def _all_reduce(self, grads):
        """SUM over replicas in ``_reduce_dtype``, back in each gradient's own dtype after."""
        import tensorflow as tf

        present = [(i, g) for i, g in enumerate(grads) if g is not None]
        low = [_cast(g, self._reduce_dtype) for _, g in present]
        reduced = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, low)
        out = list(grads)
        for (i, g), r in zip(present, reduced):
            out[i] = _cast(r, g.dtype)
        return out

    def _replica_step(self, x, y, start=None):
        """One replica's step; ``start``: when the step's batch was on this worker, from which its
        arrival at the all-reduce is timed."""
        import tensorflow as tf

        batch = batch_fingerprint(x, y) if self.fingerprints else None
        # Time the local forward and backward pass: t0 after the batch arrives and before the
        # model may start (the identity waits for t0), t1 after the last local gradient.
        with tf.control_dependencies([x]):
            t0 = tf.timestamp()
        with tf.control_dependencies([t0]):
            x = to_unit_range(tf.identity(x))
        if self.accumulation_steps == 1:
            grads, per_example, correct = self._forward_backward(x, y)
            loss_mean = tf.reduce_mean(tf.cast(per_example, tf.float32))
            accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        else:
            grads, loss_mean, accuracy = self._accumulate(x, y)
        with tf.control_dependencies(grads):
            t1 = tf.timestamp()
        local = tf.cast(tf.shape(y)[0], tf.float32)
        # The gradients are of (local sum / global batch); rescale to the local mean's gradient.
        grad_norm = tf.linalg.global_norm(grads) * (self.global_batch_size / local)
        if self._scaled:
            grad_norm /= tf.cast(self.optimizer.dynamic_scale, tf.float32)
        if self._reduce_dtype is not None:
            grads = self._all_reduce(grads)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        # Arrival at the all-reduce, in this worker's own clock from its batch's arrival: a cluster's
        # get_next ends in a collective of its own (whether every worker still has a batch), which
        # releases every worker together, so the workers' figures compare without comparing their
        # clocks (docs/diagnose.md, "straggler").
        ready = tf.cast(t1 - start, tf.float32) if start is not None else tf.constant(-1.0)
        stats = tf.stack([loss_mean, accuracy, local, tf.cast(grad_norm, tf.float32), tf.cast(t1 - t0, tf.float32),
                          ready])
        if batch is not None:
            return stats[tf.newaxis], batch
        return stats[tf.newaxis]  # [1, STATS] so that gather stacks replicas on axis 0

    def _train_k_impl(self, iterator, k):
        import tensorflow as tf

        steps = tf.TensorArray(tf.float32, size=k)
        waits = tf.TensorArray(tf.float32, size=k)
        batches = tf.TensorArray(tf.int32, size=k if self.fingerprints else 0)
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
            per_replica = self.strategy.run(self._replica_step, args=(*batch, t1))
            if self.fingerprints:
                per_replica, prints = per_replica
                batches = batches.write(i, self.strategy.gather(prints, axis=0))
            gathered = self.strategy.gather(per_replica, axis=0)
            steps = steps.write(i, gathered)
            waits = waits.write(i, tf.cast(t1 - t0, tf.float32))
            with tf.control_dependencies([gathered]):
                done = tf.timestamp()
        if self.fingerprints:
            return steps.stack(), waits.stack(), batches.stack()
        return steps.stack(), waits.stack()

    def train(self, iterator, k: int) -> np.ndarray:
        """Run ``k`` steps; return their per-replica statistics, shape ``[k, replicas, STATS]``.
        ``last_input_wait`` then holds the seconds each step waited for its batch, ``[k]``."""
        import tensorflow as tf

        out = self._train_k(iterator, tf.constant(k, tf.int32))
        stats, waits = out[0], out[1]
        self.last_input_wait = waits.numpy()
        if self.fingerprints:
            words = np.ascontiguousarray(out[2].numpy())  # [k, replicas, 2] int32: 8 bytes each
            self.last_batches = np.array([[row.tobytes().hex() for row in step] for step in words])
        return stats.numpy()


def batch_fingerprint(x, y):
    """A 64-bit hash of one replica's batch, its images and labels in their order, as ``[1, 2]``
    int32 (gathered over replicas like the statistics). Two steps that trained on the same
    examples in the same order have the same one (``replica-studio rehearse`` compares them);
    a data position lost on resume changes it. FarmHash over the raw bytes: about a memory
    read of the batch, only when ``training.batch_fingerprints`` asks for it."""
    import tensorflow as tf

    images = tf.fingerprint(tf.reshape(x, [1, -1]))  # [1, 8] uint8
    labels = tf.fingerprint(tf.reshape(y, [1, -1]))
    both = tf.fingerprint(tf.concat([images, labels], axis=1))
    return tf.bitcast(tf.reshape(both, [1, 2, 4]), tf.int32)


def summarize_step(stats: np.ndarray) -> tuple[float, float]:
    """Global loss and accuracy of one step from its ``[replicas, STATS]`` rows, weighting each
    replica by its example count."""
    n = stats[:, EXAMPLES]
    total = float(n.sum()) or 1.0
    return float((stats[:, LOSS] * n).sum() / total), float((stats[:, ACCURACY] * n).sum() / total)


def _cast(grad, dtype):
    """A gradient in ``dtype``; IndexedSlices (embeddings) keep their indices."""
    import tensorflow as tf

    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(tf.cast(grad.values, dtype), grad.indices, grad.dense_shape)
    return tf.cast(grad, dtype)


def without_optimizer_all_reduce(optimizer) -> None:
    """Make ``optimizer`` apply the gradients it is given as they are. Keras 3's TensorFlow
    optimizer all-reduces inside ``apply_gradients`` (``_backend_update_step`` calls
    ``_all_reduce_sum_gradients``, with no dtype or options) and offers no public switch, so the
    instance's private method is replaced (tests/core/test_communication.py pins it). A
    LossScaleOptimizer reduces in its inner optimizer."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if not callable(getattr(inner, "_all_reduce_sum_gradients", None)):
        raise TypeError(f"strategy.all_reduce_dtype: this Keras ({type(inner).__module__}) has no "
                           "optimizer._all_reduce_sum_gradients to replace; use float32")
    inner._all_reduce_sum_gradients = lambda grads_and_vars: list(grads_and_vars)
