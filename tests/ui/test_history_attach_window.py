"""The window attaches to a long run through ``attach --history`` (gui_app/ui/window/run_attach.py):
its history from the pyramid, then its events, here and on a real SSH host (tests/ssh_host.py,
where Open reads it so too: gui_app/ui/window/remote_runs.py); the charts are the ones Open
draws for that run here, with a one-step spike at full zoom-out."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from pyramid_runs import write_long_run, write_run

from gui_app.core import rundir
from gui_app.core.history.pyramid import FOLDER, META_FILE
from gui_app.core.history.training import LOSS

STEPS, SPIKE = 30_000, 12_345


def _attach_killed_then_resumed(qtbot, window, run, resumed, pyramid: bool) -> None:
    """The window's attach processes killed (its notice says so) and, before it attaches again,
    the run's files replaced by ``resumed``'s (its ``pyramid`` too): a new inode for events.jsonl,
    as a resume's."""
    import os
    import signal

    from test_detached_window import _attach_pids

    with qtbot.waitSignal(window.supervisor.notice, timeout=10_000):
        for pid in _attach_pids(str(run)):
            os.kill(pid, signal.SIGKILL)
    if pyramid:
        shutil.rmtree(run / FOLDER)
        os.replace(resumed / FOLDER, run / FOLDER)
    os.replace(resumed / rundir.EVENTS_FILE, run / rundir.EVENTS_FILE)


def _attached(qtbot, window, key: str) -> None:
    histories: list = []
    window.supervisor.history.connect(lambda run, history: histories.append(run))
    with qtbot.waitSignal(window.supervisor.finished, timeout=120_000) as finished:
        assert window.attach.attach(key)
    assert finished.args[:2] == ["completed", key], finished.args
    assert histories == [key]  # one history line, from the pyramid
    window.training_tab.flush()


def _same_as_open(window, run) -> None:
    shown, opened = window.shown.history, rundir.read_history(run)
    assert shown.coarse and len(shown.training.steps) < 5_000  # not 30,000 points a series
    np.testing.assert_array_equal(shown.training.steps.data, opened.training.steps.data)
    np.testing.assert_array_equal(shown.replicas.metrics["loss"].data, opened.replicas.metrics["loss"].data)
    assert (shown.status.status, shown.status.step) == ("completed", STEPS)
    _, y = window.training_tab._curves[LOSS].getData()
    assert np.nanmax(y) == 50.0  # the spike, drawn at full zoom-out


def test_a_long_run_here_is_followed_from_its_history(qtbot, window, runs_dir):
    run = write_long_run(runs_dir / "20260101-000000-digits-long", STEPS, spikes={SPIKE: 50.0})
    _attached(qtbot, window, str(run))
    _same_as_open(window, run)


def test_a_dropped_attachment_goes_on_from_the_byte_the_history_ended_at(qtbot, window, runs_dir):
    """A live long run (its lock held here): attached from its history, the attach process
    killed, steps written meanwhile; attached again with --from-byte and --from: each step once."""
    import os
    import signal

    from pyramid_runs import finished, step_lines
    from test_detached_window import _attach_pids

    from gui_app.core import run_lock
    from gui_app.core.events import Step

    window.settings.confirm_close_during_run = False  # a failure below leaves the run followed: no question
    run = write_long_run(runs_dir / "20260101-000000-digits-live", STEPS, spikes={SPIKE: 50.0}, end=False)
    live: list[int] = []
    window.supervisor.events.connect(lambda batch: live.extend(e.step for e in batch if isinstance(e, Step)))
    with run_lock.RunLock(run):
        histories: list = []
        window.supervisor.history.connect(lambda key, history: histories.append(key))
        assert window.attach.attach(str(run))
        qtbot.waitUntil(lambda: histories == [str(run)] and bool(live) and live[-1] == STEPS, timeout=60_000)
        tail = list(live)
        assert tail == list(range(tail[0], STEPS + 1)) and len(tail) <= 256  # the open bucket's steps
        with qtbot.waitSignal(window.supervisor.notice, timeout=10_000):
            for pid in _attach_pids(str(run)):
                os.kill(pid, signal.SIGKILL)
        with open(run / rundir.EVENTS_FILE, "a", encoding="utf-8") as f:
            f.writelines(step_lines(STEPS + 1, STEPS + 50))
            f.write(finished(STEPS + 50))
    with qtbot.waitSignal(window.supervisor.finished, timeout=60_000) as ended:  # the run let go of its lock
        pass
    assert ended.args[:2] == ["completed", str(run)]
    assert live == list(range(tail[0], STEPS + 51))  # none lost, none twice across the drop
    steps = window.shown.history.training.steps.data[:, 0]
    assert steps[-51:].tolist() == list(range(STEPS, STEPS + 51))


@pytest.mark.slow
def test_a_long_run_on_a_host_is_followed_from_its_history(qtbot, on_host, ssh_host, tmp_path):
    from ssh_host import ALIAS, USER

    from gui_app.core.ssh_hosts import run_key
    from gui_app.ui.window.main_window import MainWindow

    run = ssh_host.home / f"window-{tmp_path.name}" / "20260101-000000-digits-old"
    try:
        write_run(run, STEPS, spikes={SPIKE: 50.0})  # an old run: its pyramid is built there
        for path in [run.parent, run, *run.rglob("*")]:
            shutil.chown(path, USER, USER)
        window = MainWindow()
        qtbot.addWidget(window)
        try:
            key = run_key(ALIAS, str(run))
            _attached(qtbot, window, key)
            assert (run / FOLDER / META_FILE).exists()
            _same_as_open(window, run)
            window.shown.clear()  # Open of the host's run: from its pyramid there too
            window.open_run(key)
            qtbot.waitUntil(lambda: not window.remote_open.is_reading() and window.state.shown_run == key,
                            timeout=60_000)
            window.training_tab.flush()
            _same_as_open(window, run)
        finally:
            window.close()
    finally:
        shutil.rmtree(run.parent, ignore_errors=True)


def test_a_reattachment_after_a_resume_replaced_the_file_reads_its_history_again(qtbot, window, runs_dir, tmp_path):
    """A live long run attached from its history, the attach process killed, and meanwhile the
    run resumed from an earlier checkpoint (its file replaced: the steps after it dropped, the byte
    the history ended at a line's start still) and gone on to its end: attached again, the window
    is told the file is another (attach --inode), asks for the history again, and shows what Open
    shows of the new file, each step once."""

    from pyramid_runs import resume_replaces

    from gui_app.core import run_lock
    from gui_app.core.events import Step

    window.settings.confirm_close_during_run = False
    run = write_long_run(runs_dir / "20260101-000000-digits-resumed", STEPS, end=False)
    # the resumed run's files, made beside it beforehand: swapped in within the re-attachment's back-off
    resumed = tmp_path / "resumed"
    shutil.copytree(run, resumed)
    resume_replaces(resumed, STEPS - 100, 150)
    live: list[int] = []
    window.supervisor.events.connect(lambda batch: live.extend(e.step for e in batch if isinstance(e, Step)))
    histories: list = []
    window.supervisor.history.connect(lambda key, history: histories.append(key))
    with run_lock.RunLock(run):
        assert window.attach.attach(str(run))
        qtbot.waitUntil(lambda: histories == [str(run)] and bool(live) and live[-1] == STEPS, timeout=60_000)
        _attach_killed_then_resumed(qtbot, window, run, resumed, pyramid=True)
        qtbot.waitUntil(lambda: len(histories) == 2, timeout=30_000)
    with qtbot.waitSignal(window.supervisor.finished, timeout=60_000) as ended:
        pass
    assert ended.args[:2] == ["completed", str(run)]
    window.training_tab.flush()
    shown, opened = window.shown.history, rundir.read_history(run)
    assert shown.status.step == STEPS + 50
    np.testing.assert_array_equal(shown.training.steps.data, opened.training.steps.data)
    np.testing.assert_array_equal(shown.replicas.metrics["loss"].data, opened.replicas.metrics["loss"].data)


def test_a_run_of_some_mb_is_read_off_the_gui_thread_then_followed(qtbot, window, runs_dir, monkeypatch):
    """A live run below the long-run size (no pyramid: its events are read and folded as Open
    does: 0.8-1.4 s for these 6.7 MB here) but above what the GUI thread reads itself
    (file_actions.READ_HERE_BYTES): read on a thread, the window's timers keep running, then
    followed from the line after what was read. The read is made 1.5 s slower (a loaded
    machine, a slow disk) so the GUI thread's gap tells it apart from showing the charts."""
    import time

    from gui_gaps import gui_thread_gaps, slowed
    from pyramid_runs import finished, step_lines

    from gui_app.core import run_lock
    from gui_app.ui.window import run_attach
    from gui_app.ui.window.file_actions import READ_HERE_BYTES

    on_gui = slowed(monkeypatch, run_attach, "read_history_so_far", 1.5)

    window.settings.confirm_close_during_run = False
    steps = 12_000
    run = write_run(runs_dir / "20260101-000000-digits-mid", steps, end=False)
    size = (run / rundir.EVENTS_FILE).stat().st_size
    assert READ_HERE_BYTES * 8 < size < rundir.LONG_RUN_BYTES, size
    with run_lock.RunLock(run):
        with gui_thread_gaps() as gaps:
            asked = time.monotonic()
            assert window.attach.attach(str(run))
            qtbot.waitUntil(lambda: window.shown.history.status.step == steps, timeout=60_000)
            took = time.monotonic() - asked
            qtbot.wait(60)  # a tick after the last of it: a freeze to the end is a gap too
        with open(run / rundir.EVENTS_FILE, "a", encoding="utf-8") as f:
            f.writelines(step_lines(steps + 1, steps + 5))
            f.write(finished(steps + 5))
    with qtbot.waitSignal(window.supervisor.finished, timeout=60_000) as ended:
        pass
    assert ended.args[:2] == ["completed", str(run)], ended.args
    window.training_tab.flush()
    shown = window.shown.history
    assert shown.training.steps.data[:, 0].tolist() == list(range(1, steps + 6))  # each step once
    print(f"attach of {size / 1e6:.1f} MB: history shown after {took:.2f} s, largest GUI gap {max(gaps) * 1000:.0f} ms")
    assert on_gui == [False]
    assert max(gaps) < 1.0, (max(gaps), took)  # on the GUI thread: one gap of the read and more (2.3-3 s)


def test_a_long_runs_history_is_folded_off_the_gui_thread_before_its_events(qtbot, window, runs_dir, monkeypatch):
    """The history line is folded on a thread (made 1.5 s slow here: up to ~1 s for 2,000 buckets
    of 8 replicas on a loaded machine); the events after it, and the run's end, wait for it, so
    the charts are Open's, its run_finished folded last."""
    import threading
    import time

    from gui_gaps import gui_thread_gaps

    from gui_app.ui.workers import attach_reads

    on_gui: list[bool] = []
    fold = attach_reads.long_history

    def slow_fold(*args):
        on_gui.append(threading.current_thread() is threading.main_thread())
        time.sleep(1.5)
        return fold(*args)

    monkeypatch.setattr(attach_reads, "long_history", slow_fold)
    run = write_long_run(runs_dir / "20260101-000000-digits-long", STEPS, spikes={SPIKE: 50.0})
    with gui_thread_gaps() as gaps:
        _attached(qtbot, window, str(run))
        qtbot.wait(60)
    _same_as_open(window, run)
    assert on_gui == [False]
    assert max(gaps) < 1.0, max(gaps)


def test_a_short_runs_reattachment_after_a_resume_replaced_its_file_replays_it_once(qtbot, window, runs_dir,
                                                                                     tmp_path):
    """A short live run (read here, then ``attach --from N --inode I``), the attach killed and the
    run resumed meanwhile from 30 steps back: its N lines are other lines of the new file (the
    step at N again, the resumed run_started skipped). The window is told (exit 3), shows no
    charts and then every line of the new file, each step once."""

    from pyramid_runs import resume_replaces
    from test_detached_window import _attach_pids

    from gui_app.core import run_lock
    from gui_app.core.events import Step

    window.settings.confirm_close_during_run = False
    steps = 300
    run = write_run(runs_dir / "20260101-000000-digits-short", steps, end=False)
    resumed = tmp_path / "resumed"
    shutil.copytree(run, resumed)
    resume_replaces(resumed, steps - 30, 50)
    live: list[int] = []
    window.supervisor.events.connect(lambda batch: live.extend(e.step for e in batch if isinstance(e, Step)))
    histories: list = []
    window.supervisor.history.connect(lambda key, history: histories.append((key, history.status.step)))
    with run_lock.RunLock(run):
        assert window.attach.attach(str(run))
        qtbot.waitUntil(lambda: bool(_attach_pids(str(run))), timeout=30_000)
        _attach_killed_then_resumed(qtbot, window, run, resumed, pyramid=False)
        qtbot.waitUntil(lambda: bool(live) and live[-1] == steps + 20, timeout=30_000)
    with qtbot.waitSignal(window.supervisor.finished, timeout=60_000) as ended:
        pass
    assert ended.args[0] == "completed"  # (named by the replayed run_started, whose run_dir is made up here)
    assert live == list(range(1, steps + 21))  # the new file's steps, each once (was: 300 again, 301...)
    assert histories == [(str(run), 0)]  # nothing shown, before every line of the new file
    window.training_tab.flush()
    assert window.shown.history.training.steps.data[:, 0].tolist() == list(range(1, steps + 21))
