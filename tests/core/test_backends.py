"""Where a run lives (core/backends): the one decision which backend a run has, and what each
answers -- its log, whether a stop and a resume go to its scheduler, whether it may go on, why it
ended -- over fake Slurm commands on PATH."""
from __future__ import annotations

import pytest

from gui_app.core import run_lock, rundir
from gui_app.core.backends import (
    HereBackend,
    KubernetesBackend,
    SlurmBackend,
    SshBackend,
    backend_for,
    kubernetes,
    scheduled_jobs,
    slurm,
)
from gui_app.core.backends.base import JobWatch
from gui_app.core.ssh_hosts import Host
from tests.fake_slurm import FakeSlurm


@pytest.fixture
def fake(tmp_path, monkeypatch) -> FakeSlurm:
    fake = FakeSlurm(tmp_path / "slurm")
    monkeypatch.setenv("PATH", fake.path())
    return fake


def _run(folder, name="run"):
    run_dir = folder / name
    run_dir.mkdir()
    (run_dir / rundir.CONFIG_FILE).write_text("{}")
    return run_dir


def test_each_run_has_one_backend_by_its_record_or_its_host(tmp_path):
    here, slurm_run, kube_run = _run(tmp_path, "here"), _run(tmp_path, "slurm"), _run(tmp_path, "kube")
    slurm.record_job(slurm_run, "7")
    kubernetes.record_job(kube_run, "replica-abc", namespace="ml")
    assert type(backend_for(here)) is HereBackend
    assert type(backend_for(slurm_run)) is SlurmBackend and backend_for(slurm_run).scheduled
    assert type(backend_for(kube_run)) is KubernetesBackend
    remote = backend_for("/data/runs/x", Host("user@gpu1"))
    assert isinstance(remote, SshBackend) and remote.remote and not remote.scheduled
    assert remote.command(lambda *args: ["never", *args], ["attach", "/data/runs/x"])[0] == "ssh"
    engine = backend_for(here).command(lambda *args: ["engine", *args], ["log", str(here)])
    assert engine == ["engine", "log", str(here)]
    (slurm_run / slurm.JOB_FILE).write_text("{half")  # an unreadable record is no scheduler's
    assert type(backend_for(slurm_run)) is HereBackend


def test_a_slurm_run_logs_into_its_jobs_output_and_stops_through_scancel_unless_a_process_here_holds_it(
        tmp_path, fake):
    run_dir = _run(tmp_path)
    slurm.record_job(run_dir, "9")
    backend = backend_for(run_dir)
    assert backend.log_path() == run_dir / "slurm-9.out"
    assert not backend.resubmits() and not backend.by_scheduler()  # no script: not a job of submit --slurm
    (run_dir / slurm.SCRIPT_FILE).write_text("#!/bin/sh\n")
    assert backend.resubmits() and backend.by_scheduler()
    with run_lock.RunLock(run_dir):
        assert not backend.by_scheduler()  # a process here reads its control channel
    fake.set("9", "RUNNING")
    assert backend.job() == ("9", slurm.SlurmJobState("RUNNING")) and backend.active()
    assert backend.cancel() is None and fake.state("9") == "CANCELLED"
    assert not backend.active()
    assert backend.ending(stopping=True) == ("stopped", "Slurm job 9 was cancelled")
    assert backend.ending(stopping=False)[0] == "failed"
    assert scheduled_jobs([run_dir, tmp_path / "other"]) == {str(run_dir): ("9", slurm.SlurmJobState("CANCELLED"))}


def test_a_run_here_has_its_engine_log_no_job_and_no_scheduler_to_stop_it(tmp_path):
    run_dir = _run(tmp_path)
    backend = backend_for(run_dir)
    assert backend.log_path() == run_dir / rundir.LOG_FILE
    assert backend.job() is None and backend.state() is None and not backend.active()
    assert not backend.by_scheduler() and not backend.resubmits() and backend.ending(True) is None
    (run_dir / rundir.LOG_FILE).write_bytes(b"before\nafter\n")
    with backend.log(from_byte=7) as log:
        assert log.read() == [b"after\n"]


def test_only_a_slurm_run_is_watched_by_its_follower(tmp_path, fake):
    slurm_run, kube_run = _run(tmp_path, "slurm_run"), _run(tmp_path, "kube")
    slurm.record_job(slurm_run, "3")
    kubernetes.record_job(kube_run, "replica-x")
    fake.set("3", "PENDING", "Resources")
    assert JobWatch(backend_for(slurm_run), every_s=60).active()
    assert not JobWatch(backend_for(kube_run), every_s=60).active()  # its copy of the chief's output tells
    assert not JobWatch(backend_for(_run(tmp_path, "here")), every_s=60).active()
    assert len(fake.calls("squeue")) == 1


def test_an_ssh_backend_prepared_builds_its_command_lines_without_asking_ssh_again(monkeypatch, tmp_path):
    import os

    from gui_app.core.backends import ssh as ssh_backend

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # the shared connections' folder
    asked: list[str] = []
    monkeypatch.setattr(ssh_backend, "connection_name", lambda host: asked.append(host.name) or "a" * 40)
    backend = ssh_backend.SshBackend("/home/me/runs/a", Host("gpu1"))
    backend.prepare()  # where waiting is fine (the window: a Background thread)
    first = backend.command(lambda *args: list(args), ["attach", "/home/me/runs/a"])
    backend.command(lambda *args: list(args), ["log", "/home/me/runs/a"])
    assert asked == ["gpu1"]  # asked once, by prepare
    if os.name == "posix":
        assert any(word.startswith("ControlPath=") and word.endswith("/" + "a" * 40) for word in first)
