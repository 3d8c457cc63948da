"""Runs that live on their own, from the window (docs/detached.md): the window's run is detached,
closing with Keep lets it go on, a new window finds it running and follows it again, and a
dropped attachment is made again from the last line the window has -- no step lost or doubled."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from PySide6.QtCore import Qt

import pytest
from run_dirs import listed_status, wait_listed, write_run
from windows import alive

from gui_app.core import events as ev
from gui_app.core.live_runs import live_process
from gui_app.core.rundir import EVENTS_FILE, read_history_so_far, read_run
from gui_app.identity import app_env
from gui_app.ui.config.config_panel import first_launch_config
from gui_app.ui.dialogs.close_run import KEEP, close_question
from gui_app.ui.window import main_window, run_attach
from gui_app.ui.window.main_window import MainWindow
from gui_app.ui.window.run_rows import ATTACHED_TIP
from gui_app.ui.workers.supervisor import RunSupervisor


@pytest.fixture
def make_window(qtbot, fake_engine):
    windows = []

    def make() -> MainWindow:
        window = MainWindow(engine_command=fake_engine)
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.settings.confirm_close_during_run = False
        window.close()


def _attach_pids(run_dir: str) -> list[int]:
    """The ``attach`` processes following ``run_dir`` (read from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            words = (entry / "cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError):
            continue
        if "attach" in words and run_dir in words:
            pids.append(int(entry.name))
    return pids


def _last_event(run_dir: str) -> dict:
    return json.loads((Path(run_dir) / EVENTS_FILE).read_text().splitlines()[-1])


def _chart_steps(window: MainWindow) -> list[int]:
    """The step numbers of the training chart's points, in order."""
    return [int(step) for step in window.shown.history.training.steps.column(0)]


def _steps(batches: list[list[ev.Event]]) -> list[int]:
    return [e.step for batch in batches for e in batch if isinstance(e, ev.Step)]


def test_the_close_question_offers_keep_first(qtbot):
    box = close_question(None)
    qtbot.addWidget(box)
    assert {b.text(): b.property("answer") for b in box.buttons()} == {
        "Keep training in the background": "keep", "Stop the run": "stop", "Cancel": "cancel"}
    assert box.defaultButton().property("answer") == KEEP and box.escapeButton().property("answer") == "cancel"


def test_keep_closes_at_once_and_the_run_completes_on_its_own(qtbot, make_window, fake_engine, monkeypatch):
    fake_engine.configure("normal", steps=30, step_seconds=0.1)
    window = make_window()
    with qtbot.waitSignal(window.supervisor.run_started, timeout=15_000) as started:
        window.window_actions.train.trigger()
    run_dir = started.args[0].run_dir
    process = live_process(run_dir)
    attach = _attach_pids(run_dir)
    assert process is not None and process.detached and attach and process.pid not in attach
    assert os.getsid(process.pid) == process.pid != os.getsid(0)  # its own session: not the window's child
    monkeypatch.setattr(main_window, "ask_close_during_run", lambda parent: KEEP)
    window.close()
    assert not window.isVisible()  # at once
    qtbot.waitUntil(lambda: not any(alive(pid) for pid in attach), timeout=5000)  # the attachment ended
    assert live_process(run_dir) == process  # the run goes on
    qtbot.waitUntil(lambda: live_process(run_dir) is None, timeout=20_000)
    assert _last_event(run_dir)["type"] == "run_finished" and _last_event(run_dir)["status"] == "completed"


def test_without_the_question_closing_keeps_the_run(qtbot, make_window, fake_engine, monkeypatch):
    fake_engine.configure("wait")
    window = make_window()
    window.settings.confirm_close_during_run = False
    monkeypatch.setattr(main_window, "ask_close_during_run", lambda parent: pytest.fail("asked"))
    with qtbot.waitSignal(window.supervisor.run_started, timeout=15_000) as started:
        window.window_actions.train.trigger()
    window.close()
    assert not window.isVisible() and live_process(started.args[0].run_dir) is not None


def test_a_new_window_follows_the_running_run_with_every_step_once(qtbot, make_window, fake_engine, monkeypatch):
    """The window goes away without stopping its run (Keep, as after a kill -9 of the window);
    the next one lists the run as running, follows it (history from the file, then live), and
    Stop stops it."""
    fake_engine.configure("normal", steps=400, step_seconds=0.02)
    first = make_window()
    with qtbot.waitSignal(first.supervisor.events, check_params_cb=lambda b: any(isinstance(e, ev.Step) for e in b),
                          timeout=15_000):
        first.window_actions.train.trigger()
    run_dir = first.state.active_run
    monkeypatch.setattr(main_window, "ask_close_during_run", lambda parent: KEEP)
    first.close()
    read, attached = [], []  # (lines, last step) the new window read from the file; the line it attached from

    def reading(run_dir):
        so_far = read_history_so_far(run_dir)
        read.append((so_far.lines, so_far.history.training.steps.column(0)[-1]))  # (the window adds to it)
        return so_far

    monkeypatch.setattr(run_attach, "read_history_so_far", reading)
    follow = RunSupervisor.attach
    monkeypatch.setattr(RunSupervisor, "attach", lambda self, run_dir, started, from_line, *args, **kwargs: (
        attached.append(from_line), follow(self, run_dir, started, from_line, *args, **kwargs))[1])
    second = make_window()
    batches: list[list[ev.Event]] = []
    second.supervisor.events.connect(batches.append)
    qtbot.waitUntil(lambda: second.state.active_run == run_dir, timeout=15_000)  # attached at launch
    assert second.supervisor.state() == "running" and second.window_actions.stop.isEnabled()
    wait_listed(qtbot, second.runs)
    assert listed_status(second.runs, run_dir) == "running"
    item = second.runs.tree.findItems("running", Qt.MatchFlag.MatchStartsWith)[0]
    assert ATTACHED_TIP in item.toolTip(0) and not item.icon(0).isNull()
    history_steps = _chart_steps(second)
    assert history_steps and history_steps == list(range(1, len(history_steps) + 1))
    with qtbot.waitSignal(second.supervisor.events, check_params_cb=lambda b: any(isinstance(e, ev.Step) for e in b),
                          timeout=10_000):
        pass  # live steps arrive
    with qtbot.waitSignal(second.supervisor.finished, timeout=15_000) as finished:
        second.window_actions.stop.trigger()
    assert finished.args[:2] == ["stopped", run_dir]
    live = _steps(batches)
    # attach goes on after the lines read from the file: nothing twice (live steps may have come
    # before this test listened, and be in history_steps already, under load)
    ((lines, last_read),) = read
    assert attached == [lines] and lines > 0
    assert live and live[0] > last_read
    assert live == list(range(live[0], live[-1] + 1))
    steps = _chart_steps(second)
    assert steps == list(range(1, read_run(run_dir).step + 1))  # every step once
    assert read_run(run_dir).status == "stopped"


def test_a_killed_attachment_is_made_again_from_the_last_line(qtbot, make_window, fake_engine, runs_dir,
                                                               tmp_path):
    # 8 s of steps: the window (made after the run started) must attach while it runs. With 3 s, a
    # window slow to start under load attached to a nearly finished run, whose attach had ended
    # by the kill below (ProcessLookupError, once).
    fake_engine.configure("normal", steps=400, step_seconds=0.02)
    config = tmp_path / "config.json"
    config.write_text(first_launch_config().to_json())
    start = subprocess.run(fake_engine("train", str(config), "--detach", "--runs-dir", str(runs_dir)),
                           capture_output=True, text=True, timeout=60, env=app_env())
    run_dir = start.stdout.strip()  # started in a terminal, detached
    assert start.returncode == 0 and Path(run_dir).is_dir(), start.stderr
    window = make_window()
    batches: list[list[ev.Event]] = []
    window.supervisor.events.connect(batches.append)
    notices: list[str] = []
    window.supervisor.notice.connect(notices.append)
    qtbot.waitUntil(lambda: window.state.active_run == run_dir, timeout=15_000)
    first_attach = _attach_pids(run_dir)
    qtbot.waitUntil(lambda: len(_steps(batches)) >= 5, timeout=10_000)
    assert _last_event(run_dir)["type"] != "run_finished", "the run ended before the attach could be killed"
    for pid in first_attach:
        os.kill(pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: notices[:1] == ["following the run again…"], timeout=5000)
    assert window.state.status == "following the run again…"
    with qtbot.waitSignal(window.supervisor.finished, timeout=30_000) as finished:
        pass
    assert finished.args[0] == "completed" and "" in notices  # attached again, and said so
    assert set(_attach_pids(run_dir)).isdisjoint(first_attach)
    assert _chart_steps(window) == list(range(1, 401))  # every step once
    live = _steps(batches)
    assert live == sorted(set(live)) and live[-1] == 400  # none twice, none lost after the history


def test_the_host_column_names_another_machine_and_a_running_run_can_be_attached(qtbot, runs_dir):
    from stub_run import StubRun

    from gui_app.core import run_lock
    from gui_app.core.live_runs import record_process
    from gui_app.ui.window.run_rows import HOST
    from gui_app.ui.window.runs_panel import RunsPanel
    from gui_app.ui.window.window_state import WindowState

    here = write_run(runs_dir, "here", "completed")
    record_process(here, "train", detached=True)  # ran on this machine: no host shown
    there = write_run(runs_dir, "there", "stopped", started=1.7e9 + 10)
    (there / "process.json").write_text(json.dumps({"pid": 1, "host": "gpu1", "command": "train", "detached": True,
                                                     "started": 1.7e9}))
    running = write_run(runs_dir, "running", None, started=1.7e9 + 20)
    panel = RunsPanel(WindowState(StubRun(), runs_dir))
    qtbot.addWidget(panel)
    with run_lock.RunLock(running):  # this process runs it, as far as the list can tell
        record_process(running, "train", detached=True)
        panel.refresh()
        qtbot.waitUntil(lambda: not panel.is_filling())
        assert not panel.tree.isColumnHidden(HOST)
        hosts = {panel.tree.topLevelItem(i).text(0): panel.tree.topLevelItem(i).text(HOST) for i in range(3)}
        assert hosts == {"running": "", "stopped (10/20)": "gpu1", "completed": ""}
        assert panel.running_runs() == [str(running)] and listed_status(panel, running) == "running"
        panel.select(running)
        assert panel.attach_button.isEnabled() and not panel.resume_button.isEnabled()
        with qtbot.waitSignal(panel.attach_requested) as asked:
            panel.attach_button.click()
        assert asked.args == [str(running)]
