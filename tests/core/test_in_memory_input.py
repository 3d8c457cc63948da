"""The in-memory input source: the set held once (the tensor is NumPy's buffer, no iterator
copies it), every batch gathered by index in the epoch's seeded order, global step s using
exactly order[s*G:(s+1)*G] on any number of input pipelines, and evaluation seeing every
example once with its label."""
from __future__ import annotations

import numpy as np
import pytest

from gui_app.core.config import DatasetConfig

N, BATCH = 100, 8


def _dataset(n: int = N, size: int = 4, classes: int = 10):
    """Images that carry their own index in their first two pixels; label = index % classes."""
    from gui_app.engine.datasets.base import make_dataset

    x = np.zeros((n + 20, size, size, 1), np.uint8)
    index = np.arange(n + 20)
    x[:, 0, 0, 0], x[:, 0, 1, 0] = index % 256, index // 256
    y = index % classes
    return make_dataset("indexed", "test", x[:n], y[:n], x[n:], y[n:], [str(c) for c in range(classes)])


def _indices(images) -> np.ndarray:
    pixels = np.asarray(images)[:, 0, :2, 0]
    assert pixels.dtype == np.uint8  # batches stay uint8 until the replica's step scales them
    pixels = pixels.astype(np.int64)
    return pixels[:, 0] + 256 * pixels[:, 1]


def _source(validation: str = "split"):
    from gui_app.engine.training.in_memory import InMemoryInput

    return InMemoryInput(_dataset(), DatasetConfig(validation=validation, validation_split=0.1), BATCH)


def _expected_order(source, epoch: int, seed: int) -> np.ndarray:
    from gui_app.engine.training.pipeline import epoch_order, validation_rows

    rows, _ = validation_rows(N, DatasetConfig(validation="split", validation_split=0.1))
    assert source.train_examples == len(rows) == 90 and source.validation_examples == 10
    return rows[epoch_order(len(rows), epoch, seed)]


def test_training_batches_follow_the_seeded_order_and_resume_mid_epoch():
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())
    source = _source()
    order = _expected_order(source, 1, 7)
    seen = []
    for x, y in source.train(strategy, epoch=1, start_batch=0, seed=7):
        xs = strategy.experimental_local_results(x)
        seen.append(np.concatenate([_indices(part) for part in xs]))
        labels = np.concatenate([part.numpy() for part in strategy.experimental_local_results(y)])
        assert (labels == seen[-1] % 10).all()
    assert len(seen) == 90 // BATCH
    for s, batch in enumerate(seen):
        assert batch.tolist() == order[s * BATCH:(s + 1) * BATCH].tolist()
    x, _ = next(iter(source.train(strategy, epoch=1, start_batch=3, seed=7)))
    resumed = np.concatenate([_indices(part) for part in strategy.experimental_local_results(x)])
    assert resumed.tolist() == order[3 * BATCH:4 * BATCH].tolist()


class _TwoWorkers:
    """Stands in for a strategy of 2 workers with 2 replicas each: hands back the dataset_fn."""

    num_replicas_in_sync = 4

    def distribute_datasets_from_function(self, dataset_fn):
        return dataset_fn


def test_each_input_pipeline_gathers_its_share_of_every_global_step():
    import tensorflow as tf

    from gui_app.engine.training import pipeline

    source = _source()
    order = _expected_order(source, 0, 3)
    dataset_fn = source.train(_TwoWorkers(), epoch=0, start_batch=0, seed=3)
    per_worker = []
    for worker in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker, num_replicas_in_sync=4)
        batches = [_indices(x) for x, _ in dataset_fn(context)]
        assert all(len(b) == BATCH // 4 for b in batches)
        per_worker.append(batches)
    for s in range(90 // BATCH):  # a worker's two local replicas take consecutive per-replica batches
        step = np.concatenate([per_worker[w][2 * s + r] for w in range(2) for r in range(2)])
        assert sorted(step.tolist()) == sorted(order[s * BATCH:(s + 1) * BATCH].tolist())
    assert pipeline.options(tf).experimental_optimization.apply_default_optimizations is False


@pytest.mark.parametrize("validation", ["split", "test"])
def test_evaluation_sees_every_example_once_with_its_label(validation):
    import keras
    import tensorflow as tf

    from gui_app.engine.training.evaluation import Evaluator

    strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())
    source = _source(validation)
    with strategy.scope():
        model = keras.Sequential([keras.Input((4, 4, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])
    evaluator = Evaluator(strategy, model, 10)
    test = evaluator.evaluate(source.test(strategy), keep_predictions=True)
    assert test.examples == 20 and sum(test.examples_per_replica) == 20  # 20 examples padded to 3 batches of 8
    assert test.labels.tolist() == (np.arange(N, N + 20) % 10).tolist()
    assert source.test_images(np.array([0, 5]))[:, 0, 0, 0].tolist() == [N % 256, (N + 5) % 256]
    held_out = evaluator.evaluate(source.validation(strategy), keep_predictions=True)
    assert held_out.examples == (10 if validation == "split" else 20)


def test_normalization_stats_are_those_of_the_training_rows():
    from gui_app.engine.training.models import channel_stats
    from gui_app.engine.training.pipeline import validation_rows

    dataset = _dataset()
    rows, _ = validation_rows(N, DatasetConfig())
    assert _source().normalization_stats() == channel_stats(dataset.x_train[rows])


def test_the_set_is_shared_with_tensorflow_and_never_copied_by_an_iterator():
    import tensorflow as tf

    from gui_app.engine.datasets.base import make_dataset
    from gui_app.engine.datasets.stream_read import as_host_array, host_array
    from gui_app.engine.training import pipeline
    from gui_app.engine.training.in_memory import InMemoryInput

    aligned = host_array((3, 2, 2, 1))
    assert aligned.ctypes.data % 64 == 0 and as_host_array(aligned) is aligned
    aligned[...] = 1
    shared = pipeline.host_tensor(aligned)
    aligned[0, 0, 0, 0] = 9
    assert int(shared[0, 0, 0, 0]) == 9  # one buffer
    copied = as_host_array(np.ones((3, 5), np.uint8)[:, 1:])  # not contiguous: copied, aligned
    assert copied.ctypes.data % 64 == 0 and copied.flags.c_contiguous

    def resident() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    n = 12_000  # 64x64x3: 147 MB
    rng = np.random.default_rng(0)
    x = host_array((n, 64, 64, 3))
    x[...] = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    dataset = make_dataset("big", "test", x, rng.integers(0, 10, n), x[:256], rng.integers(0, 10, 256), None)
    source = InMemoryInput(dataset, DatasetConfig(), 64)
    strategy = tf.distribute.get_strategy()
    before = resident()
    iterators = [iter(source.train(strategy, 1, 0, 1)), iter(source.train(strategy, 2, 5, 1)),
                 iter(source.validation(strategy)), iter(source.test(strategy))]
    for it in iterators:
        next(it)
    # With tf.data's default optimizations the first iterator serialized the set: +162 MB (18 MB without).
    assert resident() - before < 0.3 * x.nbytes
