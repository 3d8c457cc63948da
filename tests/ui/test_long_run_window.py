"""A long run opens in the real window from its pyramid: in bounded time and memory, with a spike
at one step of 200,000 drawn at full zoom-out (gui_app/core/history/coarse.py)."""
from __future__ import annotations

import os
import time

import numpy as np
from pyramid_runs import write_long_run
from run_dirs import wait_listed

from gui_app.core import rundir
from gui_app.core.history.training import LOSS

STEPS, SPIKE = 200_000, 123_457


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_long_run_opens_in_bounded_time_and_memory_with_its_spike_drawn(qtbot, window, runs_dir, monkeypatch):
    from gui_app.ui.charts import zoom_detail

    reads = []
    monkeypatch.setattr(zoom_detail, "read_detail", lambda *args: reads.append(args) or rundir.read_detail(*args))
    run = write_long_run(runs_dir / "20260101-000000-digits-long", STEPS, spikes={SPIKE: 50.0})
    window.runs.refresh()
    wait_listed(qtbot, window.runs)
    before = _rss_bytes()
    started = time.monotonic()
    assert window.files.open_run(str(run)) and window.files.is_reading()  # read on a thread (file_actions.py)
    qtbot.waitUntil(lambda: not window.files.is_reading(), timeout=10_000)
    window.training_tab.flush()
    elapsed = time.monotonic() - started
    grown = _rss_bytes() - before
    history = window.training_tab.history
    assert history.status.step == STEPS and history.status.status == "completed"
    assert len(history.training.steps) < 5_000  # not 200,000 points a series
    # Issue 30's target for Open (2 s). Measured here 0.14 s at load 7.5 on 2 cores (0.37 s with
    # a Step made and folded per bucket point); folding the 130 MB events file took over 20 s.
    assert elapsed < 2.0, elapsed
    assert grown < 100 << 20, grown
    x, y = window.training_tab._curves[LOSS].getData()
    view = window.training_tab.loss_plot.getViewBox().viewRange()[0]
    assert view[0] <= 1 and view[1] >= STEPS  # the whole run is in view
    assert np.nanmax(y) == 50.0 and abs(x[np.nanargmax(y)] - SPIKE) <= 1024  # within a pixel or two
    qtbot.wait(zoom_detail.SETTLE_MS + 200)
    assert reads == [] and not window.training_tab.zoom_detail.busy()  # the whole run in view: nothing finer to read

    # Zoomed in on the spike: the steps in view are read again, every one of them (off the GUI thread).
    window.training_tab.loss_plot.setXRange(SPIKE - 200, SPIKE + 200, padding=0)
    qtbot.waitUntil(lambda: window.training_tab.zoom_detail.detail is not None, timeout=10_000)
    window.training_tab.flush()
    x, y = window.training_tab._curves[LOSS].getData()
    around = (x >= SPIKE - 150) & (x <= SPIKE + 150)
    assert np.array_equal(x[around], np.arange(SPIKE - 150, SPIKE + 151))  # one point a step
    assert y[x == SPIKE][0] == 50.0 and np.all(y[around & (x != SPIKE)] < 3.0)


def test_an_old_long_run_is_read_off_the_gui_thread_and_shown_once_read(qtbot, window, runs_dir, monkeypatch):
    """No pyramid yet (a version that kept none): Open builds it on a thread of its own, the
    window stays responsive, and the run comes on screen once read, as Open of a run that has one."""
    import threading

    from pyramid_runs import write_run

    from gui_app.core import rundir
    from gui_app.core.history.pyramid import Meta
    from gui_app.ui.window import file_actions

    run = write_run(runs_dir / "20260101-000000-digits-old", 30_000, spikes={12_345: 50.0})
    threads = []

    def read_history(run_dir):
        threads.append(threading.current_thread())
        return rundir.read_history(run_dir)

    def pyramid_end() -> int | None:  # the byte of events.jsonl its pyramid covers (None: no pyramid)
        meta = Meta.read(run / rundir.HISTORY_DIR)
        return None if meta is None else meta.end

    monkeypatch.setattr(file_actions, "read_history", read_history)
    assert pyramid_end() is None
    window.files.open_run(str(run))
    qtbot.waitUntil(lambda: window.shown.history.coarse, timeout=60_000)
    assert threads and threads[0] is not threading.main_thread()
    assert window.state.shown_run == str(run) and pyramid_end() == (run / rundir.EVENTS_FILE).stat().st_size
    window.training_tab.flush()
    _, y = window.training_tab._curves[LOSS].getData()
    assert np.nanmax(y) == 50.0 and len(y) < 5_000
    np.testing.assert_array_equal(window.shown.history.training.steps.data,
                                  rundir.read_history(run).training.steps.data)
