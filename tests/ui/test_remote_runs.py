"""The run list's rows of a host's runs, without a host: their keys, what ``runs --json`` there
gives a row, and a host that does not answer (a name that does not resolve: ssh fails at once)
as one line beside the list. With a real host: tests/ui/test_remote_window.py."""
from __future__ import annotations

import json

from run_dirs import listed_status, wait_listed, write_run

from gui_app.core.hosts import Host, run_key, split_run_key
from gui_app.core.live_runs import list_live_runs
from gui_app.ui.window.remote_runs import _row
from gui_app.ui.window.run_rows import HOST
from gui_app.ui.window.runs_panel import RunsPanel
from gui_app.ui.window.window_state import WindowState
from gui_app.ui.workers.supervisor import RunSupervisor


def test_keys_of_runs_there_never_collide_with_paths_here():
    key = run_key("me@gpu1", "/home/me/runs/a")
    assert key == "me@gpu1:/home/me/runs/a" and split_run_key(key) == ("me@gpu1", "/home/me/runs/a")
    assert split_run_key("/home/me/runs/a") == (None, "/home/me/runs/a")
    assert split_run_key("relative:path") == (None, "relative:path")


def test_a_row_from_runs_json_there(runs_dir):
    write_run(runs_dir, "20261201-090000-digits", "completed", accuracy=0.9)
    (entry,) = json.loads(json.dumps([run.to_json() for run in list_live_runs(runs_dir)]))
    info, resumable, process, host = _row("gpu1", entry)
    assert str(info.path) == f"gpu1:{runs_dir / '20261201-090000-digits'}" and info.name == "20261201-090000-digits"
    assert (info.status, info.step, info.test_accuracy, info.config.dataset.name) == ("completed", 10, 0.9, "digits")
    assert (resumable, process, host) == (False, None, "gpu1")
    info, _, process, _ = _row("gpu1", {**entry, "status": "running", "pid": 42, "host": "gpu1-node", "config": {}})
    assert (process.pid, process.host) == (42, "gpu1-node")
    write_run(runs_dir, "20261201-100000-digits", "stopped")  # with a checkpoint: resumable there, as read there
    stopped = next(run.to_json() for run in list_live_runs(runs_dir) if run.info.status == "stopped")
    assert stopped["resumable"] and _row("gpu1", stopped)[1] is True


def test_a_host_that_does_not_answer_is_one_line_and_the_runs_here_stay(qtbot, runs_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # ssh's shared connections: the test's own folder
    here = write_run(runs_dir, "20261201-090000-digits", "completed")
    supervisor = RunSupervisor()
    state = WindowState(supervisor, runs_dir)
    panel = RunsPanel(state, host=Host("rs-no-such-host.invalid"))
    qtbot.addWidget(panel)
    try:
        wait_listed(qtbot, panel)
        assert listed_status(panel, here) == "completed"
        assert panel.reading_label.text().startswith("rs-no-such-host.invalid: unknown host (ssh: Could not resolve")
        assert panel.tree.isColumnHidden(HOST)  # no run of another machine listed
        panel.set_host(None)
        wait_listed(qtbot, panel)
        assert panel.reading_label.text() == ""
    finally:
        panel.stop_reading()
        supervisor.close()
