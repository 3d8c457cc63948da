"""A sweep whose trials are Slurm jobs, on the real Slurm of the tests (tests/slurm_cluster.py:
node9 and node10 in network namespaces): its study in Optuna's journal file in the sweep folder,
each trial one job on a whole node (``cpus_per_task`` 2 of 2), one trial pruned by the threshold
pruner, the sweep's process killed (SIGKILL) while its trials' jobs run and taken up again by
``sweep resume``, ``sweep stop`` reaching the jobs with scancel (docs/sweeps.md)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from slurm_cluster import SlurmCluster, running_slurm

from gui_app.core import rundir
from gui_app.core.backends.slurm import read_job
from gui_app.identity import app_command

pytestmark = pytest.mark.slow

BASE = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
        "strategy": {"name": "multi_worker_mirrored", "workers": 1},
        "training": {"epochs": 12, "global_batch_size": 32, "optimizer": "adam", "seed": 3}}
BAD_LR = 1e-7  # after one epoch its validation accuracy is near chance (0.1): below the threshold, pruned


@pytest.fixture(scope="module")
def slurm() -> SlurmCluster:
    with running_slurm() as cluster:
        yield cluster



def _sweep_file(tmp_path: Path, trials: int, rates: list[float], **more) -> Path:
    path = tmp_path / "lr.json"
    path.write_text(json.dumps({
        "base": BASE, "parameters": {"training.learning_rate": {"choice": rates}}, "method": "grid",
        "pruner": "threshold", "pruner_threshold": 0.5, "pruner_warmup_epochs": 0, "trials": trials,
        "parallel": 2, "seed": 1, "slurm": {"cpus_per_task": 2}, **more}))
    return path


def _cli(slurm: SlurmCluster, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(app_command(*args), capture_output=True, text=True, env=slurm.app_env(), timeout=timeout)


def _start(slurm: SlurmCluster, sweep_file: Path, sweeps: Path, out: Path) -> subprocess.Popen:
    with out.open("wb") as f:
        return subprocess.Popen(app_command("sweep", str(sweep_file), "--sweeps-dir", str(sweeps)), stdout=f,
                                stderr=subprocess.STDOUT, env=slurm.app_env(), start_new_session=True)


def _wait_for(what, timeout: float, why) -> None:
    """Poll a condition on files another process writes (the sweep's lines, a trial's events)."""
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise AssertionError(why())
        time.sleep(0.2)


def _lines(out: Path) -> list[str]:
    return out.read_text(errors="replace").splitlines() if out.exists() else []


def _study(sweep_dir: Path) -> optuna.Study:
    info = json.loads((sweep_dir / "study.json").read_text())
    assert info["storage"] == f"journal:{sweep_dir.resolve() / 'study.journal'}"
    from gui_app.engine.sweep.study import open_storage

    return optuna.load_study(study_name=info["study_name"], storage=open_storage(info["storage"]))


def _each_step_once(run_dir: Path) -> None:
    events = [json.loads(line) for line in (run_dir / rundir.EVENTS_FILE).read_text().splitlines() if line.strip()]
    steps = Counter(e["step"] for e in events if e["type"] == "step")
    assert steps and set(steps.values()) == {1}, [s for s, n in steps.items() if n > 1]


@pytest.mark.timeout(900)
def test_trials_run_as_jobs_on_both_nodes_one_is_pruned_and_a_killed_sweep_loses_none(slurm, tmp_path):
    rates = [0.01, 0.003, BAD_LR, 0.001]
    sweep_file = _sweep_file(tmp_path, 4, rates)
    out = tmp_path / "first.out"
    started = time.monotonic()
    driver = _start(slurm, sweep_file, tmp_path / "sweeps", out)
    _wait_for(lambda: any(line.startswith("trial 1 submitted as Slurm job") for line in _lines(out)), 120,
              lambda: "\n".join(_lines(out)))
    sweep_dir = Path(_lines(out)[0])
    records = json.loads((sweep_dir / "trials.json").read_text())
    _wait_for(lambda: all(Path(r["run_dir"], rundir.EVENTS_FILE).exists() for r in records.values()), 120,
              lambda: f"no events yet: {records}")
    os.kill(driver.pid, signal.SIGKILL)  # the sweep's process dies; its trials' jobs run on
    driver.wait(timeout=30)

    # Killed: status still shows the jobs, from the recorded ids.
    records = json.loads((sweep_dir / "trials.json").read_text())
    status = json.loads(_cli(slurm, "sweep", "status", str(sweep_dir), "--json").stdout)
    assert [t["job"] for t in status["trials"]] == [records[str(n)]["job"] for n in range(len(records))]
    assert status["trials"][0]["job"] and status["trials"][1]["job"]
    assert {t["state"] for t in status["trials"]} <= {"running", "completed", "pruned"}, status

    done = _cli(slurm, "sweep", "resume", str(sweep_dir))  # takes the jobs up by their ids
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("sweep completed: 4 trials (3 completed, 1 pruned, 0 failed"), done.stdout
    assert any(line.startswith("trial 0 is Slurm job") and "following it again" in line for line in lines) or \
        "trial 0 completed" in done.stdout, lines

    # No trial lost or run twice: 4 trials in the study, 4 run folders, 4 jobs each submitted once.
    study = _study(sweep_dir)
    states = Counter(t.state.name for t in study.trials)
    assert len(study.trials) == 4 and states == {"COMPLETE": 3, "PRUNED": 1}, states
    pruned = next(t for t in study.trials if t.state.name == "PRUNED")
    assert pruned.params["training.learning_rate"] == BAD_LR
    runs = sorted(p for p in (sweep_dir / "runs").iterdir() if p.is_dir())
    assert len(runs) == 4
    records = json.loads((sweep_dir / "trials.json").read_text())
    jobs = {number: read_job(record["run_dir"]) for number, record in records.items()}
    assert all(job is not None and job.earlier == () and job.job_id == records[n]["job"] for n, job in jobs.items())
    assert len({job.job_id for job in jobs.values() if job}) == 4
    nodes = Counter()
    for number, record in records.items():
        run_dir = Path(record["run_dir"])
        _each_step_once(run_dir)
        job = slurm.job(record["job"])
        assert job["JobName"] == f"rs-sweep-{sweep_dir.name}-trial-{number}"
        nodes[job["NodeList"]] += 1
        info = rundir.read_run(run_dir)
        expected = "stopped" if study.trials[int(number)].state.name == "PRUNED" else "completed"
        assert info.status == expected, (number, info.status)
    assert set(nodes) == {"node9", "node10"}, nodes  # both nodes ran trials
    assert rundir.has_checkpoint(pruned.user_attrs["run_dir"])  # scancel: it stopped with a checkpoint

    status = json.loads(_cli(slurm, "sweep", "status", str(sweep_dir), "--json").stdout)
    assert [(t["job"], t["job_state"]) for t in status["trials"]] == [
        (records[str(n)]["job"], "cancelled" if n == pruned.number else "completed") for n in range(4)]
    text = _cli(slurm, "sweep", "status", str(sweep_dir)).stdout
    assert f"(Slurm job {records['0']['job']}: " in text
    events = [json.loads(line) for line in Path(pruned.user_attrs["run_dir"], rundir.EVENTS_FILE).open()]
    epoch_step = next(e["step"] for e in events if e["type"] == "epoch_end")
    print(f"4 trials as Slurm jobs (parallel 2) on {dict(nodes)}: {took:.0f} s with a kill and resume; trials "
          + ", ".join(f"{t.number} {(t.datetime_complete - t.datetime_start).total_seconds():.0f} s"
                      for t in study.trials)
          + f"; pruned after epoch 1 (step {epoch_step}), stopped at step {events[-1]['step']}")


@pytest.mark.timeout(600)
def test_sweep_stop_cancels_the_jobs_with_a_checkpoint_and_resume_continues_them(slurm, tmp_path):
    longer = {**BASE, "training": {**BASE["training"], "epochs": 24}}  # the stop lands well before the end
    sweep_file = _sweep_file(tmp_path, 2, [0.01, 0.003], base=longer)
    out = tmp_path / "first.out"
    driver = _start(slurm, sweep_file, tmp_path / "sweeps", out)
    _wait_for(lambda: sum("epoch 2:" in line for line in _lines(out)) >= 2, 180, lambda: "\n".join(_lines(out)))
    sweep_dir = Path(_lines(out)[0])
    stop = _cli(slurm, "sweep", "stop", str(sweep_dir))
    assert stop.returncode == 0, stop.stderr
    assert driver.wait(timeout=120) == 0
    lines = _lines(out)
    assert lines[-2].startswith("sweep stopped: 2 trials"), lines
    records = json.loads((sweep_dir / "trials.json").read_text())
    first_jobs = {n: r["job"] for n, r in records.items()}
    for record in records.values():
        assert slurm.job(record["job"])["JobState"] == "CANCELLED"
        assert rundir.read_run(record["run_dir"]).status == "stopped" and rundir.has_checkpoint(record["run_dir"])

    done = _cli(slurm, "sweep", "resume", str(sweep_dir))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1].startswith("sweep completed: 2 trials (2 completed"), done.stdout
    records = json.loads((sweep_dir / "trials.json").read_text())
    for number, record in records.items():
        job = read_job(record["run_dir"])
        assert job is not None and job.earlier == (first_jobs[number],)  # submitted again, once
        assert rundir.read_run(record["run_dir"]).status == "completed"
        _each_step_once(Path(record["run_dir"]))  # continued from its checkpoint, no step twice
    assert len(list((sweep_dir / "runs").iterdir())) == 2
