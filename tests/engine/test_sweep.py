"""``replica-studio sweep`` end to end: real trials on digits (a small MLP, 3 epochs), two at a
time, pruned by the median of the finished ones; killed, stopped and resumed."""
from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from engine_helpers import LineReader, run_cli

from gui_app.core import rundir
from gui_app.core.events import RunStarted
from gui_app.identity import app_command, app_env

pytestmark = pytest.mark.slow

BASE = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}, "strategy": {"name": "default"},
        "training": {"epochs": 3, "global_batch_size": 64, "optimizer": "adam", "learning_rate": 0.001, "seed": 1}}
# Rates below ~3e-4 barely learn in 3 epochs: the median pruner (after one finished trial, from
# the first epoch) stops those trials. Seed 3 draws two such rates among the first four.
SWEEP = {"base": BASE, "parameters": {"training.learning_rate": {"log_uniform": [1e-5, 3e-2]}},
         "method": "random", "pruner": "median", "pruner_warmup_epochs": 0, "pruner_startup_trials": 1,
         "trials": 6, "parallel": 2, "seed": 3}


def _status(sweep_dir: str) -> dict:
    done = run_cli("sweep", "status", sweep_dir, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _run_starts(run_dir: str) -> list[RunStarted]:
    return [e for e in rundir.read_raw_events(run_dir) if isinstance(e, RunStarted)]


def _check_record_matches_runs(sweep_dir: str, status: dict) -> None:
    """Every trial has its own valid, finished run directory, and the runs folder holds no other."""
    run_dirs = [t["run_dir"] for t in status["trials"]]
    assert len(set(run_dirs)) == len(run_dirs) and None not in run_dirs
    assert sorted(Path(r).name for r in run_dirs) == sorted(p.name for p in rundir.run_dirs(Path(sweep_dir, "runs")))
    records = json.loads(Path(sweep_dir, "trials.json").read_text())
    assert {int(n): r["run_dir"] for n, r in records.items()} == {t["number"]: t["run_dir"] for t in status["trials"]}
    for trial in status["trials"]:
        info = rundir.read_run(trial["run_dir"])
        assert info.config is not None and info.status in ("completed", "stopped"), (trial, info.status)
        assert info.config.training.learning_rate == pytest.approx(trial["parameters"]["training.learning_rate"])
        starts = _run_starts(trial["run_dir"])
        assert not starts[0].resumed and all(s.resumed for s in starts[1:])  # trained once, continued at most


def test_a_sweep_prunes_bad_trials_and_its_best_beats_the_base(tmp_path):
    # 8 epochs: a digits epoch of the MLP takes 0.1 s here, and a pruned trial must still be running
    # when its stop arrives.
    base_config = {**BASE, "training": {**BASE["training"], "epochs": 8}}
    config = tmp_path / "base.json"
    config.write_text(json.dumps(base_config))
    base = run_cli("train", str(config), "--runs-dir", str(tmp_path / "runs"), "--events", "jsonl")
    assert base.returncode == 0, base.stderr
    base_val = [json.loads(line) for line in base.stdout.splitlines() if '"epoch_end"' in line][-1]["val_accuracy"]

    sweep_file = tmp_path / "lr.json"
    sweep_file.write_text(json.dumps({**SWEEP, "base": base_config}))
    done = run_cli("sweep", str(sweep_file), "--sweeps-dir", str(tmp_path / "sweeps"), timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    sweep_dir = lines[0]
    assert Path(sweep_dir).parent == tmp_path / "sweeps" and Path(sweep_dir, "study.db").is_file()
    assert lines[-1].startswith("sweep completed: 6 trials")

    status = _status(sweep_dir)
    states = [t["state"] for t in status["trials"]]
    assert len(states) == 6 and set(states) <= {"completed", "pruned"}, states
    assert "pruned" in states
    pruned_after = {int(line.split()[1]): int(line.split()[5].rstrip(":")) for line in lines
                    if " pruned after epoch " in line}
    for trial in status["trials"]:
        if trial["state"] == "pruned":  # stopped early, with a checkpoint
            assert trial["epochs"] < 8 and rundir.read_run(trial["run_dir"]).status == "stopped", trial
            assert rundir.has_checkpoint(trial["run_dir"])
            # It waited at that epoch's end for the decision: no epoch ran after it (--pause-after-each-epoch).
            assert trial["epochs"] == pruned_after[trial["number"]], (trial, pruned_after)
    _check_record_matches_runs(sweep_dir, status)
    assert status["best"]["metric"] >= base_val, (status["best"], base_val)
    assert f"best trial {status['best']['number']}:" in lines[-1]
    text = run_cli("sweep", "status", sweep_dir)
    assert text.returncode == 0 and text.stdout.splitlines()[0].split()[:3] == ["trial", "state", "val_accuracy"]
    compared = run_cli("compare", sweep_dir, "--json")  # a sweep folder stands for its trials' runs
    assert compared.returncode == 0, compared.stderr
    table = json.loads(compared.stdout)
    assert table["keys"] == ["training.learning_rate"] and len(table["rows"]) == 6


def test_a_killed_sweep_resumes_and_a_stopped_one_continues(tmp_path):
    sweep_file = tmp_path / "lr.json"
    sweep_file.write_text(json.dumps({**SWEEP, "trials": 5, "pruner": "none"}))
    # Two GPUs as the sweep sees them (none is there: TensorFlow runs on the CPU): one each per trial.
    proc = subprocess.Popen(app_command("sweep", str(sweep_file), "--sweeps-dir", str(tmp_path / "sweeps")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=app_env({"CUDA_VISIBLE_DEVICES": "0,1"}))
    lines = LineReader(proc.stdout)._lines
    try:
        sweep_dir = lines.get(timeout=60).strip()
        seen = []
        while not any(line.startswith("trial 2 started") for line in seen):  # one finished, two running
            seen.append(lines.get(timeout=300))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    told = [int(line.split()[1]) for line in seen if line.split()[2:3] == ["completed:"]]
    assert {line.split(":")[0] for line in seen if " started " in line} == {
        "trial 0 started on GPU 0", "trial 1 started on GPU 1", f"trial 2 started on GPU {told[0]}"}  # the freed one
    record = json.loads(Path(sweep_dir, "trials.json").read_text())["2"]
    environ = Path(f"/proc/{record['pid']}/environ").read_bytes().split(b"\0")
    assert f"CUDA_VISIBLE_DEVICES={record['device']}".encode() in environ  # what the trial's process got
    status = _status(sweep_dir)
    assert not status["running"] and len(status["trials"]) == 3
    assert all(status["trials"][n]["state"] == "completed" for n in told) and told
    assert status["trials"][2]["state"] == "running"  # the trials outlived the sweep's process

    stop = run_cli("sweep", "stop", sweep_dir)  # no sweep process: the trials are stopped directly
    assert stop.returncode == 0, stop.stderr
    status = _status(sweep_dir)
    stopped = [t["number"] for t in status["trials"] if t["state"] == "stopped"]
    assert 2 in stopped and status["stop_asked"]
    for number in stopped:
        assert rundir.read_run(status["trials"][number]["run_dir"]).status in ("stopped", "interrupted")

    resumed = run_cli("sweep", "resume", sweep_dir, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    for number in stopped:
        assert f"trial {number} resumed from its last checkpoint" in resumed.stdout
    assert resumed.stdout.splitlines()[-1].startswith("sweep completed: 5 trials (5 completed")
    status = _status(sweep_dir)
    assert [t["number"] for t in status["trials"]] == [0, 1, 2, 3, 4]
    assert all(t["state"] == "completed" and t["epochs"] == 3 for t in status["trials"]), status["trials"]
    _check_record_matches_runs(sweep_dir, status)
    for number in stopped:  # continued from its checkpoint, not trained again
        assert len(_run_starts(status["trials"][number]["run_dir"])) == 2
    assert all(len(_run_starts(status["trials"][n]["run_dir"])) == 1 for n in told)  # none ran again


def test_sweep_stop_stops_a_running_sweep_and_its_trials_with_checkpoints(tmp_path):
    sweep_file = tmp_path / "lr.json"
    sweep_file.write_text(json.dumps({**SWEEP, "base": {**BASE, "training": {**BASE["training"], "epochs": 20}},
                                      "trials": 4, "pruner": "none"}))
    proc = subprocess.Popen(app_command("sweep", str(sweep_file), "--sweeps-dir", str(tmp_path / "sweeps")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=app_env())
    lines = LineReader(proc.stdout)._lines
    try:
        sweep_dir = lines.get(timeout=60).strip()
        while not lines.get(timeout=300).startswith("trial 0 epoch 1:"):
            pass
        stop = run_cli("sweep", "stop", sweep_dir)
        assert stop.returncode == 0, stop.stderr
        assert stop.stdout.startswith(f"asked the sweep (process {proc.pid}) to stop its trials")
        assert proc.wait(timeout=60) == 0  # `sweep stop` returned after the sweep's process ended
        rest = list(iter(lambda: lines.get(timeout=30), None))  # the reader's lines to the end of output
    finally:
        proc.kill()
    assert rest[-2].startswith("sweep stopped: 2 trials (0 completed, 0 pruned, 0 failed, 2 stopped)")
    status = _status(sweep_dir)
    assert [t["state"] for t in status["trials"]] == ["stopped", "stopped"] and status["stop_asked"]
    for trial in status["trials"]:
        assert rundir.read_run(trial["run_dir"]).status == "stopped" and rundir.has_checkpoint(trial["run_dir"])
        assert trial["epochs"] < 20
