"""The run-process API without training: a detached start's answer, the fork into a session of
its own, stop on a run that is not running, and a trial's reader across a resume's replaced file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gui_app.engine.run import process as run_process
from gui_app.engine.sweep.trial_process import TrialRun


def _starting(tmp_path: Path, script: str) -> run_process.Starting:
    out, log = tmp_path / "n.run", tmp_path / "n.log"
    with out.open("ab") as stdout, log.open("ab") as stderr:
        process = subprocess.Popen([sys.executable, "-c", script], stdout=stdout, stderr=stderr)
    return run_process.Starting(process, out, log)


def test_a_start_answers_its_run_directory_once_its_process_printed_it(tmp_path):
    starting = _starting(tmp_path, "print('/runs/20260101-000000-digits-mlp')")
    assert starting.wait(timeout=30) == Path("/runs/20260101-000000-digits-mlp")


def test_a_start_that_ended_before_its_run_started_fails_with_its_line_and_code(tmp_path):
    starting = _starting(tmp_path, "import sys; print('replica-studio train: config: no such file', "
                                   "file=sys.stderr); sys.exit(2)")
    with pytest.raises(run_process.StartFailed) as failed:
        starting.wait(timeout=30)
    assert (failed.value.code, str(failed.value)) == (2, "replica-studio train: config: no such file")
    (tmp_path / "silent").mkdir()
    silent = _starting(tmp_path / "silent", "raise SystemExit(0)")
    with pytest.raises(run_process.StartFailed) as failed:  # exit 0 without a run directory: not started
        silent.wait(timeout=30)
    assert failed.value.code > 0


def test_fork_session_runs_the_body_in_a_session_of_its_own_with_its_output_in_the_log(tmp_path):
    log = tmp_path / "sweep.log"

    def body() -> int:
        os.write(1, f"session {os.getsid(0)} pid {os.getpid()}\n".encode())  # (fd 1: pytest captures sys.stdout)
        return 3

    pid = run_process.fork_session(body, log=log)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 3
    assert log.read_text() == f"session {pid} pid {pid}\n"  # the leader of a new session


def test_stop_and_send_on_a_run_that_is_not_running_say_so(tmp_path):
    assert run_process.stop(tmp_path) is False
    assert run_process.send(tmp_path, "continue") is False


def _write(path: Path, *events: dict) -> None:
    with path.open("a") as f:
        f.writelines(json.dumps({"time": 1, **e}) + "\n" for e in events)


def test_a_trial_reads_complete_lines_and_goes_on_in_a_resumes_replaced_file(tmp_path):
    events = tmp_path / "events.jsonl"
    started = {"type": "run_started", "run_dir": str(tmp_path), "config": {}}
    epoch = [{"type": "epoch_end", "epoch": n, "step": 10 * n, "val_accuracy": n / 10} for n in (1, 2, 3)]
    _write(events, started, epoch[0])
    torn = (json.dumps({"time": 1, **epoch[1]}) + "\n").encode()
    with events.open("ab") as f:
        f.write(torn[:20])  # the second epoch's line is still being written
    run = TrialRun(tmp_path)
    assert [e.epoch for e in run.read()] == [1] and run.starts == 1
    with events.open("ab") as f:
        f.write(torn[20:])
    _write(events, {"type": "run_finished", "status": "stopped"})
    assert [e.epoch for e in run.read()] == [2] and run.finished is not None
    # A resume keeps the lines up to its checkpoint (epoch 1) in a new file renamed over the old one.
    replaced = tmp_path / "new.jsonl"
    replaced.write_bytes(b"".join(events.read_bytes().splitlines(keepends=True)[:2]))
    _write(replaced, {**started, "resumed": True}, {**epoch[1], "val_accuracy": 0.25}, epoch[2])
    replaced.rename(events)
    assert [(e.epoch, e.val_accuracy) for e in run.read()] == [(2, 0.25), (3, 0.3)]
    assert run.starts == 2 and run.finished is None and run.metric("val_accuracy") == 0.3
    run.close()
