"""A run submitted to Slurm, seen from this machine: submit records its job, attach follows it
while the job is pending or running, stop cancels it (scancel), resume submits job.sbatch again.
Fake Slurm commands (tests/fake_slurm.py) that print what the real ones print."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_helpers import run_cli

from gui_app.core.backends import slurm
from gui_app.identity import app_command, app_env
from tests.fake_slurm import FakeSlurm

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fake Slurm commands")


@pytest.fixture
def fake(tmp_path) -> FakeSlurm:
    return FakeSlurm(tmp_path / "slurm")


def _submit(tmp_path: Path, fake: FakeSlurm) -> tuple[str, Path]:
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"dataset": {"name": "digits"}, "model": {"name": "mlp"},
                                  "strategy": {"name": "multi_worker_mirrored", "workers": 2},
                                  "training": {"epochs": 1, "global_batch_size": 64, "seed": 2}}))
    done = run_cli("submit", str(config), "--slurm", "--runs-dir", str(tmp_path / "runs"), env={"PATH": fake.path()})
    assert done.returncode == 0, done.stderr
    job_id, run_dir = done.stdout.splitlines()
    return job_id, Path(run_dir)


def _events(run_dir: Path, *events: dict) -> None:
    with (run_dir / "events.jsonl").open("a") as f:
        f.writelines(json.dumps(event) + "\n" for event in events)


def _wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_submit_records_the_job_in_the_run_directory(tmp_path, fake):
    job_id, run_dir = _submit(tmp_path, fake)
    job = slurm.read_job(run_dir)
    assert job_id == "41" and job is not None and job.job_id == "41" and job.earlier == ()
    assert fake.calls("sbatch") == [["sbatch", "--parsable", str(run_dir / "job.sbatch")]]


def test_the_job_runs_the_app_as_submit_was_started_unless_replica_studio_is_set(tmp_path, fake):
    _, run_dir = _submit(tmp_path, fake)  # REPLICA_STUDIO unset: sshd's PATH on a login node has no replica-studio
    fake.set("41", "CANCELLED")
    resumed = run_cli("resume", str(run_dir), env={"PATH": fake.path(), "REPLICA_STUDIO": "/opt/rs/bin/replica-studio"})
    assert resumed.returncode == 0, resumed.stderr
    assert fake.job_commands() == [" ".join(app_command()), "/opt/rs/bin/replica-studio"]


def test_attach_waits_while_the_job_is_pending_and_ends_when_slurm_ends_it(tmp_path, fake):
    _, run_dir = _submit(tmp_path, fake)
    attach = subprocess.Popen(app_command("attach", str(run_dir), "--control", "none"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=app_env({"PATH": fake.path()}))
    try:
        _wait_for(lambda: len(fake.calls("squeue")) >= 2)  # asked twice: it waits for the pending job
        assert attach.poll() is None
        fake.set("41", "CANCELLED")
        assert attach.wait(timeout=30) == 1
    finally:
        attach.kill()
    assert "Slurm job 41 is cancelled and the run did not finish (it never started)" in attach.stderr.read()


def test_attach_follows_a_running_job_and_stop_on_stdin_cancels_it(tmp_path, fake):
    _, run_dir = _submit(tmp_path, fake)
    fake.set("41", "RUNNING")
    fake.hold_running_jobs()  # the job ends after the run wrote its end, as a real one does
    _events(run_dir, {"type": "run_started", "run_dir": str(run_dir)}, {"type": "step", "step": 1})
    attach = subprocess.Popen(app_command("attach", str(run_dir)), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=app_env({"PATH": fake.path()}))
    try:
        assert json.loads(attach.stdout.readline())["type"] == "run_started"
        assert json.loads(attach.stdout.readline())["step"] == 1
        attach.stdin.write("stop\n")
        attach.stdin.flush()
        _wait_for(lambda: fake.calls("scancel"))
        assert fake.calls("scancel") == [["scancel", "41"]]
        _events(run_dir, {"type": "run_finished", "status": "stopped", "run_dir": str(run_dir), "step": 1})
        assert json.loads(attach.stdout.readline())["status"] == "stopped"
        fake.set("41", "CANCELLED")
        assert attach.wait(timeout=30) == 0  # the job ended (cancelled) after the run's run_finished
    finally:
        attach.kill()


def test_stop_cancels_the_job_and_waits_until_slurm_ended_it(tmp_path, fake):
    _, run_dir = _submit(tmp_path, fake)
    fake.set("41", "RUNNING")
    done = run_cli("stop", str(run_dir), env={"PATH": fake.path()})
    assert done.returncode == 0, done.stderr
    assert fake.calls("scancel") == [["scancel", "41"]] and fake.state("41") == "CANCELLED"
    assert "(Slurm job 41 cancelled)" in done.stdout
    again = run_cli("stop", str(run_dir), env={"PATH": fake.path()})  # nothing to stop any more
    assert again.returncode == 0 and "not running (Slurm job 41 cancelled" in again.stdout
    assert len(fake.calls("scancel")) == 1


def test_resume_submits_the_script_again_and_records_the_new_job(tmp_path, fake):
    _, run_dir = _submit(tmp_path, fake)
    refused = run_cli("resume", str(run_dir), env={"PATH": fake.path()})  # job 41 is still pending
    assert refused.returncode == 2 and "is still Slurm job 41 (pending (Priority))" in refused.stderr
    fake.set("41", "CANCELLED")
    done = run_cli("resume", str(run_dir), "--detach", "--set", "training.epochs=3", env={"PATH": fake.path()})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["42", str(run_dir)]  # the window takes the last line
    assert fake.calls("sbatch")[-1] == ["sbatch", "--parsable", str(run_dir / "job.sbatch")]
    job = slurm.read_job(run_dir)
    assert job is not None and (job.job_id, job.earlier) == ("42", ("41",))
    assert json.loads((run_dir / "config.json").read_text())["training"]["epochs"] == 3


def test_a_refused_resubmission_is_one_line(tmp_path, fake):
    _, run_dir = _submit(tmp_path, fake)
    fake.set("41", "CANCELLED")
    fake.refuse("Batch job submission failed: Invalid partition name specified")
    done = run_cli("resume", str(run_dir), env={"PATH": fake.path()})
    assert done.returncode == 2
    assert done.stderr.strip() == ("replica-studio resume: sbatch: error: Batch job submission failed: Invalid "
                                   "partition name specified")
    assert slurm.read_job(run_dir).job_id == "41"


def test_runs_lists_slurm_runs_by_their_jobs_with_one_squeue_call(tmp_path, fake):
    runs = {job_id: run_dir for job_id, run_dir in (_submit(tmp_path, fake) for _ in range(5))}
    from gui_app.core import events as ev

    started = ev.encode(ev.RunStarted(time=1.7e9, run_dir="", config={}, total_steps=20, steps_per_epoch=20,
                                      epochs=1, num_replicas=2))

    def step(n: int) -> dict:
        return ev.encode(ev.Step(time=1.7e9 + n, step=n, epoch=1, loss=0.5, accuracy=0.5, learning_rate=0.001,
                                 examples_per_sec=640.0, step_time=0.1, replicas=[]))

    fake.set("41", "PENDING", "Resources")  # never started: no events
    fake.set("42", "RUNNING")
    _events(runs["42"], started, step(3))
    fake.set("43", "CANCELLED")  # cancelled before its workers could say anything
    _events(runs["43"], started, step(1))
    fake.set("44", "CANCELLED")  # scancel: the workers stopped with a checkpoint first
    _events(runs["44"], started, ev.encode(ev.RunFinished(time=1.7e9 + 9, status="stopped", run_dir="", step=5)))
    fake.set("45", "COMPLETED")  # a job that completed without the run's run_finished completed nothing
    _events(runs["45"], started, step(2))
    asked = len(fake.calls("squeue"))
    done = run_cli("runs", "--json", "--runs-dir", str(tmp_path / "runs"), env={"PATH": fake.path()})
    assert done.returncode == 0, done.stderr
    listed = {entry["slurm_job"]: entry for entry in json.loads(done.stdout)}
    assert {job: entry["status"] for job, entry in listed.items()} == {
        "41": "pending (Resources)", "42": "running", "43": "cancelled", "44": "stopped", "45": "interrupted"}
    assert listed["42"]["step"] == 3 and listed["42"]["pid"] is None
    assert len(fake.calls("squeue")) == asked + 1  # one call for the five jobs
    table = run_cli("runs", "--runs-dir", str(tmp_path / "runs"), env={"PATH": fake.path()}).stdout
    row = next(line for line in table.splitlines() if line.endswith(str(runs["41"])))
    assert row.split()[:6] == ["pending", "(Resources)", "0", "Slurm", "job", "41"]

