"""gui_app/core/backends/slurm.py: the job record, and Slurm's answers as the real commands print
them (Slurm 22.05 of tests/slurm_cluster.py, 2026-12-01: three jobs on node9 and node10, one
cancelled, one completed; no accounting)."""
from __future__ import annotations

import json

import pytest

from gui_app.core.backends import slurm
from gui_app.core.backends.slurm import SlurmJobState as JobState
from gui_app.core.backends.slurm import parse_sacct, parse_scontrol, parse_squeue
from tests.fake_slurm import FakeSlurm

# squeue -h -j 1,2,3,99999 -o '%i|%T|%r' (99999 unknown: left out, exit 0)
SQUEUE = "3|PENDING|Resources\n1|RUNNING|None\n2|RUNNING|None\n"
# scontrol show job 1 -o, after scancel 1 (squeue no longer lists it)
SCONTROL = ("JobId=1 JobName=s.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 "
            "Account=(null) QOS=(null) JobState=CANCELLED Reason=None Dependency=(null) Requeue=1 Restarts=0 "
            "BatchFlag=1 Reboot=0 ExitCode=0:15 RunTime=00:00:02 TimeLimit=UNLIMITED TimeMin=N/A "
            "SubmitTime=2026-12-01T22:01:30 EligibleTime=2026-12-01T22:01:30 AccrueTime=2026-12-01T22:01:30 "
            "StartTime=2026-12-01T22:01:31 EndTime=2026-12-01T22:01:33 Deadline=N/A SuspendTime=None "
            "SecsPreSuspend=0 LastSchedEval=2026-12-01T22:01:31 Scheduler=Main Partition=debug "
            "AllocNode:Sid=localhost:13006 ReqNodeList=(null) ExcNodeList=(null) NodeList=node[9-10] "
            "BatchHost=node9 NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
            "TRES=cpu=2,node=2,billing=2 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 "
            "MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 "
            "Licenses=(null) Network=(null) Command=/tmp/slurmwin/jobs/s.sh WorkDir=/tmp/slurmwin/jobs "
            "StdErr=/tmp/slurmwin/jobs/o-1.out StdIn=/dev/null StdOut=/tmp/slurmwin/jobs/o-1.out Power= \n")
SCONTROL_PENDING = SCONTROL.replace("JobState=CANCELLED Reason=None", "JobState=PENDING Reason=Resources")
# scontrol show job 99999 -o and squeue -j 99999: exit 1, stdout empty, on stderr:
UNKNOWN_JOB = "slurm_load_jobs error: Invalid job id specified"


def test_squeue_lines_give_the_state_and_the_reason_of_each_job():
    assert parse_squeue(SQUEUE) == {"3": JobState("PENDING", "Resources"), "1": JobState("RUNNING"),
                                    "2": JobState("RUNNING")}
    assert parse_squeue("") == {}


def test_scontrol_gives_a_finished_jobs_state_and_nothing_for_an_unknown_job():
    assert parse_scontrol(SCONTROL) == JobState("CANCELLED")
    assert parse_scontrol(SCONTROL_PENDING) == JobState("PENDING", "Resources")
    assert parse_scontrol("") is None


def test_sacct_lines_and_a_cluster_without_accounting():
    assert parse_sacct("7|CANCELLED by 0|None\n8|FAILED|NonZeroExitCode\n") == {
        "7": JobState("CANCELLED"), "8": JobState("FAILED", "NonZeroExitCode")}
    assert parse_sacct("") == {}  # "Slurm accounting storage is disabled" is on stderr


def test_states_read_for_people():
    assert JobState("PENDING", "Resources").describe() == "pending (Resources)"
    assert JobState("RUNNING").describe() == "running"
    assert JobState("REQUEUE_HOLD").describe() == "requeue hold"
    assert JobState("PENDING", "Priority").active and JobState("REQUEUED").active
    assert not JobState("CANCELLED").active and not JobState(slurm.UNKNOWN).active


def test_the_record_keeps_the_jobs_a_run_was_submitted_as(tmp_path):
    assert slurm.read_job(tmp_path) is None
    slurm.record_job(tmp_path, "12")
    slurm.record_job(tmp_path, "12")  # the same job again (a requeue keeps its id)
    job = slurm.record_job(tmp_path, "15")
    assert (job.job_id, job.earlier) == ("15", ("12",))
    assert slurm.read_job(tmp_path) == job
    assert json.loads((tmp_path / slurm.JOB_FILE).read_text())["job_id"] == "15"
    (tmp_path / slurm.JOB_FILE).write_text("{half")
    assert slurm.read_job(tmp_path) is None


@pytest.fixture
def fake(tmp_path, monkeypatch) -> FakeSlurm:
    fake = FakeSlurm(tmp_path / "slurm")
    monkeypatch.setenv("PATH", fake.path())
    return fake


def test_one_squeue_call_for_many_jobs_then_scontrol_then_sacct(fake):
    fake.set("1", "RUNNING")
    fake.set("2", "PENDING", "Resources")
    fake.set("3", "CANCELLED")
    states = slurm.job_states(["1", "2", "3", "4"])
    assert states == {"1": JobState("RUNNING"), "2": JobState("PENDING", "Resources"), "3": JobState("CANCELLED"),
                      "4": JobState(slurm.UNKNOWN)}
    assert [call[0] for call in fake.calls()] == ["squeue", "scontrol", "scontrol", "sacct"]
    assert fake.calls("squeue")[0][1:] == ["-h", "-j", "1,2,3,4", "-o", "%i|%T|%r"]


def test_no_slurm_commands_leave_every_job_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert slurm.job_states(["5"]) == {"5": JobState(slurm.UNKNOWN)}
    assert slurm.job_states([]) == {}
    assert "scancel: not found" in slurm.cancel("5")


def test_cancel_asks_scancel(fake):
    fake.set("9", "RUNNING")
    assert slurm.cancel("9") is None
    assert fake.state("9") == "CANCELLED"


def test_run_status_is_the_jobs_where_the_events_cannot_say(tmp_path):
    from gui_app.core.backends.base import run_status
    from gui_app.core.live_runs import read_live_run

    assert run_status("interrupted", None) == "interrupted"
    assert run_status("stopped", JobState("REQUEUED")) == "requeued"  # the stopped run goes on
    assert run_status("interrupted", JobState("UNKNOWN")) == "interrupted"  # Slurm could not say
    assert run_status("new", JobState("NODE_FAIL")) == "node fail"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text("{}")
    assert read_live_run(run_dir).to_json()["slurm_job"] is None
