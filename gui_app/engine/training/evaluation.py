"""Distributed evaluation: each replica sums its loss, correct predictions and confusion
matrix; the sums are reduced with ``ReduceOp.SUM`` and the per-class figures derived from the
reduced confusion matrix, so the result does not depend on how batches were split.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gui_app.core.events import ClassMetrics, Eval
from gui_app.core.metrics import per_class_metrics
from gui_app.engine.training.pipeline import to_unit_range


@dataclass
class EvalResult:
    loss: float
    accuracy: float
    examples: int
    confusion_matrix: np.ndarray  # [classes, classes], rows = true class
    examples_per_replica: list[int]
    predictions: np.ndarray | None = None  # [examples] predicted class, in dataset order
    labels: np.ndarray | None = None  # [examples] true class, in dataset order
    confidence: np.ndarray | None = None  # [examples] probability of the predicted class
    duration: float | None = None  # seconds over every batch (all workers in step)

    def to_event(self, class_names: list[str]) -> Eval:
        per_class = [ClassMetrics(index=m["class"], name=m["name"], precision=m["precision"], recall=m["recall"],
                                  f1=m["f1"], support=m["support"])
                     for m in per_class_metrics(self.confusion_matrix, class_names)]
        return Eval(loss=self.loss, accuracy=self.accuracy, examples=self.examples,
                    confusion_matrix=self.confusion_matrix.astype(int).tolist(), class_names=list(class_names),
                    per_class=per_class, examples_per_replica=self.examples_per_replica, duration=self.duration,
                    examples_per_sec=self.examples / self.duration if self.duration else None)


class Evaluator:
    """Evaluates a model on batches of (images, labels, position in the set): an input source's
    validation or test set (``pipeline.distribute_eval``, ``streaming.eval_dataset``)."""

    def __init__(self, strategy, model, num_classes: int, from_logits: bool = True):
        import keras
        import tensorflow as tf

        self.strategy, self.model, self.num_classes = strategy, model, num_classes
        self._loss = keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits, reduction=None)
        self._from_logits = from_logits
        self._step = tf.function(self._step_impl)

    def _replica_fn(self, x, y, index):
        import tensorflow as tf

        out = tf.cast(self.model(to_unit_range(x), training=False), tf.float32)
        probs = tf.nn.softmax(out) if self._from_logits else out
        pred = tf.argmax(out, axis=-1, output_type=tf.int32)
        # Padding rows (index -1, pipeline.distribute_eval) count for nothing.
        weight = tf.cast(index >= 0, tf.float32)
        y = tf.where(index >= 0, tf.cast(y, tf.int32), 0)
        cm = tf.math.confusion_matrix(y, pred, num_classes=self.num_classes, weights=weight, dtype=tf.float32)
        loss_sum = tf.reduce_sum(tf.cast(self._loss(y, out), tf.float32) * weight)
        count = tf.reduce_sum(weight)
        return loss_sum, cm, count[tf.newaxis], index, y, pred, tf.reduce_max(probs, axis=-1)

    def _step_impl(self, batch):
        import tensorflow as tf

        loss_sum, cm, count, index, y, pred, conf = self.strategy.run(self._replica_fn, args=batch)

        def total(v):  # over the replicas
            return self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)

        def gather(v):  # every replica's rows, in replica order
            return self.strategy.gather(v, axis=0)

        return total(loss_sum), total(cm), gather(count), gather(index), gather(y), gather(pred), gather(conf)

    def evaluate(self, dataset, keep_predictions: bool = False) -> EvalResult:
        """``dataset``: a tf.data.Dataset of global batches (split here) or a distributed one."""
        import time

        import tensorflow as tf

        from gui_app.engine.training.retire import retire

        started = time.perf_counter()
        dist = iter(self.strategy.experimental_distribute_dataset(dataset) if isinstance(
            dataset, tf.data.Dataset) else dataset)
        loss = 0.0
        cm = np.zeros((self.num_classes, self.num_classes), np.float64)
        per_replica = np.zeros(self.strategy.num_replicas_in_sync, np.int64)
        indices, labels, preds, confs = [], [], [], []
        for batch in dist:
            l_sum, c, counts, index, y, pred, conf = self._step(batch)
            loss += float(l_sum)
            cm += c.numpy()
            per_replica += counts.numpy().astype(np.int64)
            if keep_predictions:
                indices.append(index.numpy())
                labels.append(y.numpy())
                preds.append(pred.numpy())
                confs.append(conf.numpy())
        retire(dist)  # off this thread: deleting a distributed iterator blocks (retire.py)
        dist = None
        n = int(per_replica.sum())
        result = EvalResult(loss / max(n, 1), float(np.trace(cm) / max(n, 1)), n, cm.astype(np.int64),
                            per_replica.tolist(), duration=time.perf_counter() - started)
        if keep_predictions and indices:
            index = np.concatenate(indices)
            real = index >= 0
            order = np.argsort(index[real])
            result.labels = np.concatenate(labels)[real][order].astype(np.int64)
            result.predictions = np.concatenate(preds)[real][order]
            result.confidence = np.concatenate(confs)[real][order]
        return result
