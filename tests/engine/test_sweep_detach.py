"""``sweep --detach`` (how the window starts and resumes sweeps) and the parameter importance of
``sweep status --json``, without training: trials the run configuration refuses fail at once."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from engine_helpers import run_cli, start_engine

from gui_app.core.run_lock import RunLock
from gui_app.core.sweep_config import SweepConfig
from gui_app.engine.sweep import study as studies
from gui_app.engine.sweep.folder import SweepFolder
from gui_app.engine.sweep.status import importance
from gui_app.identity import app_env

BASE = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}, "strategy": {"name": "default"},
        "training": {"epochs": 4}}
# Each value is valid alone; together 8 micro-batches do not fit a batch of 4: every trial fails
# without a process.
REFUSED = {"base": BASE, "parameters": {"training.accumulation_steps": {"choice": [8]},
                                        "training.global_batch_size": {"choice": [4, 6]}}, "method": "grid"}


def _wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_detached_sweep_prints_its_folder_and_runs_on_with_its_lines_in_its_log(tmp_path):
    path = tmp_path / "refused.json"
    path.write_text(json.dumps(REFUSED))
    done = run_cli("sweep", str(path), "--sweeps-dir", str(tmp_path / "sweeps"), "--detach")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and Path(lines[0]).parent == tmp_path / "sweeps"  # the folder, nothing else
    log = Path(lines[0], "sweep.log")
    _wait_for(lambda: log.is_file() and "sweep completed" in log.read_text())
    text = log.read_text()
    assert "trial 0 failed" in text and "trial 1 failed" in text
    assert "sweep completed: 2 trials (0 completed, 0 pruned, 2 failed, 0 stopped)" in text
    _wait_for(lambda: SweepFolder(lines[0]).runner_pid() is None)

    # Resumed detached: nothing is left to run, and that is no failure.
    again = run_cli("sweep", "resume", lines[0], "--detach")
    assert again.returncode == 0, again.stderr
    assert again.stdout == lines[0] + "\n"


def test_a_detached_resume_is_refused_while_a_process_runs_the_sweep(tmp_path):
    path = tmp_path / "refused.json"
    path.write_text(json.dumps(REFUSED))
    sweep_dir = run_cli("sweep", str(path), "--sweeps-dir", str(tmp_path / "sweeps")).stdout.splitlines()[0]
    with RunLock(Path(sweep_dir)):
        done = run_cli("sweep", "resume", sweep_dir, "--detach")
    assert done.returncode == 2
    assert done.stderr.startswith(f"replica-studio sweep resume: sweep_dir: {sweep_dir} is being run by process ")
    refused = run_cli("sweep", "status", sweep_dir, "--detach")
    assert refused.returncode == 2 and "--detach: only a new sweep or resume runs detached" in refused.stderr


@pytest.mark.parametrize("keys", [("training.learning_rate", "training.global_batch_size"),
                                  ("training.learning_rate",)])
def test_importance_needs_two_completed_trials_and_sums_to_one(tmp_path, keys):
    specs = {"training.learning_rate": {"log_uniform": [1e-4, 1e-1]},
             "training.global_batch_size": {"choice": [16, 32, 64]}}
    sweep = SweepConfig.from_dict({"base": BASE, "parameters": {k: specs[k] for k in keys}, "method": "random",
                                   "seed": 0})
    study = studies.load(sweep, f"sqlite:///{tmp_path / 'study.db'}", "s", create=True)
    assert importance(study) == {}
    for n in range(6):
        trial = study.ask()
        values = studies.suggest(trial, sweep)
        if n == 1:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        study.tell(trial, values["training.learning_rate"] * 10)  # the rate decides the metric
        if n == 0:
            assert importance(study) == {}  # one completed trial (and a pruned one) says nothing yet
    found = importance(study)
    assert set(found) == set(keys) and sum(found.values()) == pytest.approx(1.0)
    assert max(found, key=found.get) == "training.learning_rate"


def test_sweep_status_json_has_the_importance(tmp_path, capfd):
    from gui_app.engine.commands.cli import main as cli_main

    path = tmp_path / "refused.json"
    path.write_text(json.dumps(REFUSED))
    assert cli_main(["sweep", str(path), "--sweeps-dir", str(tmp_path / "sweeps")]) == 0
    sweep_dir = capfd.readouterr().out.splitlines()[0]
    assert cli_main(["sweep", "status", sweep_dir, "--json"]) == 0
    assert json.loads(capfd.readouterr().out)["importance"] == {}  # no trial completed


def _sweep_process(sweep_dir: str) -> subprocess.Popen:
    """A process holding the sweep's lock, as the sweep's own process does, until it is killed
    (the kernel then drops the lock). Another process, not this one: what status must see is a
    process that runs the sweep, and a lock of the test's own shares its process with the rest of
    the suite."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from gui_app.core.run_lock import RunLock\n"
                               "RunLock(sys.argv[1]).acquire()\n"
                               "print('held', flush=True)\n"
                               "time.sleep(600)\n", sweep_dir],
                              stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=app_env())
    try:
        assert holder.stdout.readline() == "held\n"
        assert SweepFolder(sweep_dir).runner_pid() == holder.pid
    except BaseException:  # not left sleeping for ten minutes behind a failed test
        holder.kill()
        holder.wait()
        raise
    return holder


def test_status_every_follows_a_running_sweep_and_ends_with_it(tmp_path):
    path = tmp_path / "refused.json"
    path.write_text(json.dumps(REFUSED))
    sweep_dir = run_cli("sweep", str(path), "--sweeps-dir", str(tmp_path / "sweeps")).stdout.splitlines()[0]
    holder = _sweep_process(sweep_dir)
    proc, reader = start_engine("sweep", "status", sweep_dir, "--json", "--every", "0.2", stdin=False)
    try:
        lines = reader.events(timeout=60)
        first, second = next(lines, None), next(lines, None)
        if second is None:  # what ended it, in the failure
            proc.wait(timeout=30)
            raise AssertionError(f"status ended after {first}: exit {proc.returncode}, {proc.stderr.read()!r}")
        assert first["running"] and second["running"] and len(second["trials"]) == 2
        holder.kill()  # the sweep's process ends
        rest = list(lines)  # it ends by itself once nothing of the sweep runs
        assert rest and not rest[-1]["running"]
        assert proc.wait(timeout=30) == 0
    finally:
        holder.kill()
        holder.wait()
        proc.kill()
    refused = run_cli("sweep", "status", sweep_dir, "--every", "1")
    assert refused.returncode == 2 and "--every: only with status --json" in refused.stderr
