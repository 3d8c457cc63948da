"""A long run opens from its pyramid (rundir.read_history -> read_long_history): bounded points
per series over the whole run, every bucket's extremes kept (a one-step spike is drawn), the
events after the pyramid folded as events; an old run without a pyramid gets one on first open."""
from __future__ import annotations

import shutil

import numpy as np
from pyramid_runs import write_long_run

from gui_app.core import rundir
from gui_app.core.history import coarse
from gui_app.core.history.training import LOSS, STEP, VAL_LOSS

STEPS, SPIKE = 30_000, 12_345


def _check(history):
    steps = history.training.steps.data
    assert len(steps) <= 2 * coarse.MAX_BUCKETS + 300  # bounded, whatever the run's length
    assert np.all(np.diff(steps[:, STEP]) > 0)  # clip-to-view needs increasing steps
    assert np.nanmax(steps[:, LOSS]) == 50.0  # the one-step spike
    assert steps[-1, STEP] == STEPS and history.status.status == "completed" and history.status.step == STEPS
    assert history.replicas.replicas == 2 and len(history.replicas.steps) == len(steps)
    assert np.nanmax(history.replicas.metrics["loss"].data[:, 0]) == 50.0
    assert history.training.validation.data[-1, 0] == 30_000 and len(history.training.validation) >= 20
    assert history.started is not None and history.started.total_steps == STEPS
    assert len(history.timing.history) > 0


def test_a_long_run_opens_from_its_pyramid(tmp_path):
    run = write_long_run(tmp_path / "run", STEPS, spikes={SPIKE: 50.0})
    history = rundir.read_history(run)
    _check(history)
    full = rundir._history(run, rundir.read_events(run))
    assert len(full.training.steps) == STEPS
    # The last steps (the pyramid's open bucket) are the events themselves.
    np.testing.assert_allclose(history.training.steps.data[-40:, :4], full.training.steps.data[-40:, :4])


def test_an_old_long_run_gets_its_pyramid_on_first_open(tmp_path):
    run = write_long_run(tmp_path / "run", STEPS, spikes={SPIKE: 50.0})
    kept = rundir.read_history(run).training.steps.data.copy()
    shutil.rmtree(run / rundir.HISTORY_DIR)
    (run / rundir.SUMMARY_FILE).unlink()
    history = rundir.read_history(run)
    _check(history)
    assert (run / rundir.HISTORY_DIR / "meta.json").is_file()
    np.testing.assert_allclose(history.training.steps.data, kept, rtol=1e-6)
    assert rundir.read_history(run).training.steps.data.shape == kept.shape  # and reads it the next time


def test_a_short_run_is_read_whole(tmp_path):
    run = write_long_run(tmp_path / "run", 3_000, spikes={1_000: 50.0})
    history = rundir.read_history(run)
    assert len(history.training.steps) == 3_000 and history.training.validation.data[:, VAL_LOSS].size == 3


def test_compare_and_the_report_read_a_long_run_from_its_pyramid(tmp_path):
    from gui_app.core.comparison import read_figures, run_duration
    from gui_app.core.report.record import read_record

    run = write_long_run(tmp_path / "run", STEPS, spikes={SPIKE: 50.0}, warn_at=5_000)
    figures = read_figures(run)
    events = rundir.read_events(run, parts=False)
    assert figures.steps == STEPS and figures.status == "completed"
    assert figures.duration == run_duration(events)
    assert len(figures.curve_steps) <= coarse.MAX_BUCKETS + 300 and np.all(np.diff(figures.curve_steps) > 0)
    last_step, last_epoch = events[-3], events[-2]  # then run_finished
    assert figures.curve_steps[-1] == STEPS and figures.curve_loss[-1] == last_step.loss
    assert figures.curve_epochs.tolist() == list(range(1, 31))  # an epoch ends every 1,000 steps
    assert figures.val_loss == last_epoch.val_loss and figures.val_accuracy == last_epoch.val_accuracy
    record = read_record(run)
    assert record.messages == [("warning", "slow disk at step 5000")]
    assert record.duration == run_duration(events) and record.examples_per_sec == 6400.0


def _buckets(count: int, replicas: int = 3, gpus: tuple[int, ...] = (0, 2), seed: int = 1) -> coarse.Buckets:
    """Made-up buckets of every kind: buckets of one step, figures never measured (N == 0), an
    infinite loss, a validation point in some buckets, replicas and GPUs."""
    from gui_app.core.history import pyramid

    columns = [*pyramid.BASE_COLUMNS,
               *(pyramid.replica_column(r, f) for r in range(replicas) for f in pyramid.REPLICA_FIGURES),
               *(pyramid.gpu_column(g, f) for g in gpus for f in pyramid.GPU_FIGURES)]
    rng = np.random.default_rng(seed)
    records = np.zeros(count, pyramid.record_dtype(len(columns)))
    sizes = rng.choice([1, 256, 256, 3], count)
    records["first_step"] = np.cumsum(np.concatenate([[1], sizes[:-1]])) + np.arange(count)  # gaps between some
    records["last_step"] = records["first_step"] + sizes - 1
    records["steps"] = sizes
    records["t0"] = 100.0 + records["first_step"] * 0.05
    records["t1"] = 100.0 + records["last_step"] * 0.05
    stats = rng.uniform(0.0, 2.0, (count, len(columns), pyramid.STATS)).astype(np.float32)
    stats[:, :, pyramid.N] = rng.choice([0, 1, 5, 5, 5], (count, len(columns)))
    stats[:, columns.index("val_loss"), pyramid.N] = rng.choice([0, 0, 0, 1], count)
    stats[7, columns.index("loss"), pyramid.MAX] = np.inf
    # No timings in the last buckets: the windows of recent steps keep points from before them.
    stats[-coarse.EDGE_BUCKETS - 10:, [columns.index("step_time"), columns.index("input_wait")], pyramid.N] = 0
    records["stats"] = stats
    return coarse.Buckets(columns, records)


def test_the_buckets_fold_at_once_into_the_series_that_their_events_fold_into():
    """fold_buckets appends most buckets as arrays: every series a chart draws, and every window
    of recent steps, is what folding events_of's events one by one gives."""
    import pyramid_runs

    from gui_app.core.events import decode_line
    from gui_app.core.history import RunHistory

    view = _buckets(600)
    histories = []
    for fold in (lambda h: h.add(coarse.events_of(view)), lambda h: coarse.fold_buckets(h, view)):
        history = RunHistory()
        history.add([decode_line(pyramid_runs.started(300_000, replicas=4).encode())])
        fold(history)
        histories.append(history)
    slow, fast = histories
    for series in ("training.steps", "training.validation", "replicas.steps", "gpus.steps", "gpus.utilization",
                   *(f"replicas.metrics.{name}" for name in slow.replicas.metrics)):
        a, b = slow, fast
        for part in series.split("."):
            a, b = (a[part], b[part]) if isinstance(a, dict) else (getattr(a, part), getattr(b, part))
        np.testing.assert_array_equal(a.data, b.data, err_msg=series)
    assert len(slow.training.steps) > 900 and len(slow.training.validation) > 50
    assert slow.replicas.devices == fast.replicas.devices and slow.replicas.workers == fast.replicas.workers
    assert slow.gpus.indices == fast.gpus.indices == [0, 2] and slow.gpus.latest == fast.gpus.latest
    assert list(slow.timing._recent) == list(fast.timing._recent) and slow.timing.shares() == fast.timing.shares()
    assert list(slow.input_wait._steps) == list(fast.input_wait._steps)
    assert list(slow.progress._times) == list(fast.progress._times)
    assert (slow.progress.step, slow.progress.latest, slow.status) == (fast.progress.step, fast.progress.latest,
                                                                        fast.status)
    assert slow.training.summary() == fast.training.summary()
