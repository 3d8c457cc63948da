"""The pieces that made the engine and the charts faster keep their meaning: the iterator
retirer deletes on its own thread, the batched TensorBoard writer writes what the scalar
writer wrote, channel statistics from a histogram equal the float computation."""
from __future__ import annotations

import threading
import time

import numpy as np

from gui_app.engine.training import retire as retire_mod
from gui_app.engine.training.models import channel_stats


class _Tracked:
    deleted_on: list[str] = []

    def __del__(self):
        _Tracked.deleted_on.append(threading.current_thread().name)


def test_retire_deletes_on_its_thread_after_the_caller_lets_go():
    _Tracked.deleted_on = []
    obj = _Tracked()
    retire_mod.retire(obj)
    time.sleep(0.05)
    assert _Tracked.deleted_on == []  # still ours: not deleted under our feet
    obj = None
    retire_mod.drain(timeout=5)
    assert _Tracked.deleted_on == ["retire-iterators"]


def test_retire_ignores_none_and_drain_without_work_returns():
    retire_mod.retire(None)
    retire_mod.drain(timeout=1)


def test_channel_stats_from_the_histogram_match_the_float_computation():
    x = np.random.default_rng(3).integers(0, 256, (500, 8, 8, 3), dtype=np.uint8)
    mean, variance = channel_stats(x)
    as_float = x.astype(np.float64) / 255.0
    np.testing.assert_allclose(mean, as_float.mean(axis=(0, 1, 2)), rtol=1e-6)
    np.testing.assert_allclose(variance, as_float.var(axis=(0, 1, 2)), rtol=1e-5)


def test_batched_tensorboard_rows_equal_scalar_writes(tmp_path):
    import tensorflow as tf

    from gui_app.engine.training.tensorboard import ScalarWriter

    one = ScalarWriter(tmp_path / "one")
    for step, (a, b) in ((1, (0.5, 2.0)), (2, (0.25, 3.0)), (3, (0.125, 4.0))):
        one.scalars(step, {"loss": a, "replica_0/loss": b})
    one.close()
    rows = ScalarWriter(tmp_path / "rows")
    rows.rows([1, 2], ("loss", "replica_0/loss"), np.array([[0.5, 2.0], [0.25, 3.0]]))
    rows.rows([3], ("loss", "replica_0/loss"), np.array([[0.125, 4.0]]))  # a shorter group: same function
    rows.close()

    def read(folder):
        out = []
        for path in sorted(folder.glob("events.out.tfevents.*")):
            for record in tf.data.TFRecordDataset(str(path)):
                event = tf.compat.v1.Event.FromString(record.numpy())
                for v in event.summary.value:
                    out.append((event.step, v.tag, float(tf.make_ndarray(v.tensor)),
                                v.metadata.plugin_data.plugin_name))
        return out

    assert read(tmp_path / "rows") == read(tmp_path / "one")
    assert len(read(tmp_path / "rows")) == 6
