"""Communication options of the training step (engine/training/loop.py): gradient accumulation
over micro-batches and the float16 all-reduce, under MirroredStrategy over two logical CPUs."""
from __future__ import annotations

import numpy as np
import pytest

GLOBAL_BATCH = 16  # 8 examples per replica


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(GLOBAL_BATCH, 6, 6, 1)).astype(np.float32)
    y = rng.integers(0, 5, size=GLOBAL_BATCH).astype(np.int32)
    return x, y


def _one_step(accumulation_steps=1, all_reduce_dtype="float32", model_name=None, lr=0.5, steps=1):
    """Weights after ``steps`` SGD steps from the same initial weights and batch; and the stats."""
    import keras
    import tensorflow as tf

    from gui_app.engine.training.loop import Trainer

    keras.utils.set_random_seed(3)
    strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())
    with strategy.scope():
        if model_name:
            from gui_app.core.config import ModelConfig
            from gui_app.engine.training.models import build_model

            model = build_model(ModelConfig(model_name), (32, 32, 3), 5)
        else:
            # An L2 penalty: accumulation must add it once per step, not once per micro-batch.
            model = keras.Sequential([keras.Input((6, 6, 1)), keras.layers.Flatten(),
                                      keras.layers.Dense(16, activation="tanh",
                                                         kernel_regularizer=keras.regularizers.L2(0.01)),
                                      keras.layers.Dense(5)])
        optimizer = keras.optimizers.SGD(lr)
        trainer = Trainer(strategy, model, optimizer, GLOBAL_BATCH, accumulation_steps=accumulation_steps,
                          all_reduce_dtype=all_reduce_dtype)
    x, y = _data()
    if model_name:
        x = np.random.default_rng(1).uniform(size=(GLOBAL_BATCH, 32, 32, 3)).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH)
    ds = ds.with_options(_options(tf))
    iterator = iter(strategy.experimental_distribute_dataset(ds))
    stats = trainer.train(iterator, steps)
    return [w.numpy() for w in model.trainable_weights], stats


def _options(tf):
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return options


@pytest.mark.parametrize("m", [4, 3])  # 3: micro-batches of 2, 3 and 3 examples
def test_accumulation_gives_the_same_update_as_one_batch(m):
    from gui_app.engine.training.loop import ACCURACY, EXAMPLES, GRAD_NORM, LOSS, STATS

    base, base_stats = _one_step(1, steps=2)
    acc, acc_stats = _one_step(m, steps=2)
    for a, b in zip(base, acc):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert acc_stats.shape == base_stats.shape == (2, 2, len(STATS))
    for col in (LOSS, ACCURACY, EXAMPLES, GRAD_NORM):
        np.testing.assert_allclose(acc_stats[:, :, col], base_stats[:, :, col], rtol=1e-4)
    assert acc_stats[0, 0, EXAMPLES] == GLOBAL_BATCH // 2


def test_accumulation_is_really_split_and_the_update_is_not_trivial():
    """Same answer is only telling if the step moved the weights and the replica ran M passes."""
    import keras

    seen = []
    real_call = keras.Sequential.call

    def call(self, inputs, *args, **kwargs):
        seen.append(inputs.shape[0])
        return real_call(self, inputs, *args, **kwargs)

    keras.Sequential.call = call
    try:
        _one_step(4)
    finally:
        keras.Sequential.call = real_call
    # Two call sites traced per replica (the first micro-batch outside the loop, the others in
    # its body), both on dynamic slices: the batch size is unknown at trace time.
    assert len(seen) == 4 and all(s is None for s in seen)
    before = _one_step(1, lr=1e-12)[0]
    after = _one_step(1)[0]
    assert max(float(np.abs(a - b).max()) for a, b in zip(before, after)) > 1e-3


def test_accumulation_with_batch_norm_trains():
    """resnet20's BatchNorm sees micro-batch statistics: close to, not equal to, M = 1."""
    base, _ = _one_step(1, model_name="resnet20", lr=0.01)
    acc, acc_stats = _one_step(4, model_name="resnet20", lr=0.01)
    assert np.all(np.isfinite(acc_stats))
    diff = max(float(np.abs(a - b).max()) for a, b in zip(base, acc))
    assert 0 < diff < 0.05


def test_float16_all_reduce_goes_through_float16_once_per_step(monkeypatch):
    from tensorflow.python.distribute import distribute_lib

    calls = []
    real = distribute_lib.ReplicaContextBase.all_reduce

    def all_reduce(self, reduce_op, value, options=None):
        import tensorflow as tf

        calls.append(sorted({t.dtype.name for t in tf.nest.flatten(value)}))
        return real(self, reduce_op, value, options)

    monkeypatch.setattr(distribute_lib.ReplicaContextBase, "all_reduce", all_reduce)
    base, _ = _one_step(1, "float32")
    keras_calls, calls[:] = list(calls), []
    low, stats = _one_step(1, "float16")
    # Keras reduces in float32 once per replica; with float16 only our reduction runs (not both).
    assert keras_calls == [["float32"], ["float32"]]
    assert calls == [["float16"], ["float16"]]
    diffs = [float(np.abs(a - b).max()) for a, b in zip(base, low)]
    assert 0 < max(diffs) < 2e-3  # float16 rounds the gradients (3 decimal digits), no more
    assert low[0].dtype == np.float32 and np.all(np.isfinite(stats))


def test_float16_and_accumulation_together():
    base, _ = _one_step(1, "float32")
    both, _ = _one_step(4, "float16")
    assert max(float(np.abs(a - b).max()) for a, b in zip(base, both)) < 2e-3


def test_keras_still_has_the_private_reduction_we_replace():
    """loop.without_optimizer_all_reduce replaces a private Keras method: pin that it exists,
    that Keras calls it from apply_gradients, and that a missing one is a clear error."""
    import keras

    from gui_app.engine.training.loop import without_optimizer_all_reduce

    sgd = keras.optimizers.SGD(0.1)
    assert callable(sgd._all_reduce_sum_gradients)
    import inspect

    from keras.src.backend.tensorflow import optimizer as tf_optimizer

    assert "_all_reduce_sum_gradients(grads_and_vars)" in inspect.getsource(
        tf_optimizer.TFOptimizer._backend_update_step)
    scaled = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    without_optimizer_all_reduce(scaled)
    assert scaled.inner_optimizer._all_reduce_sum_gradients([(1, 2)]) == [(1, 2)]

    class Bare:
        pass

    with pytest.raises(TypeError, match="strategy.all_reduce_dtype: .* no optimizer._all_reduce_sum_gradients"):
        without_optimizer_all_reduce(Bare())


def test_loss_scale_optimizer_keeps_working_with_both_options():
    """Mixed precision's LossScaleOptimizer (here in float32 compute, as CPUs allow): the scaled
    gradients are unscaled after our reduction, so the update matches plain SGD."""
    import keras
    import tensorflow as tf

    from gui_app.engine.training.loop import GRAD_NORM, Trainer

    results = []
    for scaled in (False, True):
        keras.utils.set_random_seed(3)
        strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"],
                                                  cross_device_ops=tf.distribute.ReductionToOneDevice())
        with strategy.scope():
            model = keras.Sequential([keras.Input((6, 6, 1)), keras.layers.Flatten(), keras.layers.Dense(5)])
            optimizer = keras.optimizers.SGD(0.5)
            if scaled:
                optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer, initial_scale=256.0)
            trainer = Trainer(strategy, model, optimizer, GLOBAL_BATCH, accumulation_steps=2,
                              all_reduce_dtype="float16")
        x, y = _data()
        ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH).with_options(_options(tf))
        stats = trainer.train(iter(strategy.experimental_distribute_dataset(ds)), 1)
        results.append(([w.numpy() for w in model.trainable_weights], stats))
    (plain, plain_stats), (scaled_w, scaled_stats) = results
    for a, b in zip(plain, scaled_w):
        np.testing.assert_allclose(a, b, atol=2e-3)
    np.testing.assert_allclose(scaled_stats[:, :, GRAD_NORM], plain_stats[:, :, GRAD_NORM], rtol=1e-3)


@pytest.mark.parametrize("m, dtype", [(1, "float16"), (2, "float32"), (2, "float16")])
def test_sparse_gradients_of_an_embedding(m, dtype, monkeypatch):
    """An Embedding's gradient is IndexedSlices: cast with its indices kept, summed dense."""
    import keras
    import tensorflow as tf

    from gui_app.engine.training import loop
    from gui_app.engine.training.loop import Trainer

    kinds = []
    real_cast = loop._cast
    monkeypatch.setattr(loop, "_cast", lambda g, d: (kinds.append(type(g).__name__), real_cast(g, d))[1])

    weights = []
    for options in ((1, "float32"), (m, dtype)):
        keras.utils.set_random_seed(3)
        strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"],
                                                  cross_device_ops=tf.distribute.ReductionToOneDevice())
        with strategy.scope():
            model = keras.Sequential([keras.Input((4,), dtype="int32"), keras.layers.Embedding(20, 3),
                                      keras.layers.Flatten(), keras.layers.Dense(5)])
            trainer = Trainer(strategy, model, keras.optimizers.SGD(0.5), GLOBAL_BATCH, accumulation_steps=options[0],
                              all_reduce_dtype=options[1])
        rng = np.random.default_rng(0)
        x = rng.integers(0, 20, (GLOBAL_BATCH, 4)).astype(np.int32)
        y = rng.integers(0, 5, GLOBAL_BATCH).astype(np.int32)
        ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH).with_options(_options(tf))
        trainer.train(iter(strategy.experimental_distribute_dataset(ds)), 2)
        weights.append([w.numpy() for w in model.trainable_weights])
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, atol=2e-3 if dtype == "float16" else 1e-5)
    if (m, dtype) == (1, "float16"):
        assert "IndexedSlices" in kinds  # the sparse path really ran
