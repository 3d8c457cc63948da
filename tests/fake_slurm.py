"""Fake ``sbatch``, ``squeue``, ``scontrol``, ``sacct`` and ``scancel`` on PATH that print what
the real ones print (Slurm 22.05 of tests/slurm_cluster.py, recorded in
tests/core/test_slurm_backend.py), over a job table the test sets: ``FakeSlurm.set(job, state,
reason)``. sbatch queues a PENDING job and runs nothing (the ``REPLICA_STUDIO`` it was given, which
the job would run, goes to ``job_commands``); scancel marks it CANCELLED, or a running job
COMPLETING after :meth:`FakeSlurm.hold_running_jobs` (as while its processes stop; the test then
sets CANCELLED); no accounting: sacct says so, exit 1. Every call is appended to ``calls``.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

_SCRIPT = r'''#!{python}
import json, os, sys
from pathlib import Path
table = Path({table!r})
jobs = json.loads(table.read_text())
name, args = Path(sys.argv[0]).name, sys.argv[1:]
with open({calls!r}, "a") as f:
    f.write(json.dumps([name, *args]) + "\n")
def save():
    table.write_text(json.dumps(jobs))
if name == "sbatch":
    if jobs.get("refuse"):
        print("sbatch: error: " + jobs["refuse"], file=sys.stderr); sys.exit(1)
    job = str(jobs["next"]); jobs["next"] += 1; jobs[job] = ["PENDING", "Priority"]; save()
    with open({commands!r}, "a") as f:
        f.write(json.dumps(os.environ.get("REPLICA_STUDIO")) + "\n")
    print(job)
elif name == "squeue":
    ids = args[args.index("-j") + 1].split(",")
    shown = [i for i in ids if i in jobs and jobs[i][0] in ("PENDING", "RUNNING", "COMPLETING")]
    if not shown and not any(i in jobs for i in ids):
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr); sys.exit(1)
    for i in shown:
        print(f"{{i}}|{{jobs[i][0]}}|{{jobs[i][1]}}")
elif name == "scontrol" and args[:2] == ["show", "job"]:
    i = args[2]
    if i not in jobs:
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr); sys.exit(1)
    print(f"JobId={{i}} JobName=s.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 "
          f"Account=(null) QOS=(null) JobState={{jobs[i][0]}} Reason={{jobs[i][1]}} Dependency=(null) Requeue=1 "
          "Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:15 RunTime=00:00:02 NodeList=node[9-10] BatchHost=node9 ")
elif name == "sacct":
    print("Slurm accounting storage is disabled", file=sys.stderr); sys.exit(1)
elif name == "scancel":
    i = args[0]
    if i in jobs and jobs[i][0] in ("PENDING", "RUNNING"):
        # A running job's processes get SIGTERM and end in their own time (COMPLETING meanwhile,
        # where the test asked for it: hold_running_jobs); a pending one has none.
        held = jobs[i][0] == "RUNNING" and jobs.get("hold_running_jobs")
        jobs[i] = ["COMPLETING" if held else "CANCELLED", "None"]; save()
'''
COMMANDS = ("sbatch", "squeue", "scontrol", "sacct", "scancel")


class FakeSlurm:
    def __init__(self, folder: Path) -> None:
        self.bin = folder / "bin"
        self.bin.mkdir(parents=True)
        self.table, self.calls_file = folder / "jobs.json", folder / "calls.jsonl"
        self.commands_file = folder / "job_commands.jsonl"
        self.table.write_text(json.dumps({"next": 41}))
        self.calls_file.write_text("")
        for name in COMMANDS:
            path = self.bin / name
            path.write_text(_SCRIPT.format(python=sys.executable, table=str(self.table), calls=str(self.calls_file),
                                           commands=str(self.commands_file)))
            path.chmod(0o755)

    def path(self) -> str:
        return f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"

    def set(self, job_id: str, state: str, reason: str = "None") -> None:
        jobs = json.loads(self.table.read_text())
        jobs[job_id] = [state, reason]
        self.table.write_text(json.dumps(jobs))

    def hold_running_jobs(self) -> None:
        """scancel leaves a running job COMPLETING until the test sets its end (real Slurm
        keeps it so while its processes stop and write their last events)."""
        jobs = json.loads(self.table.read_text())
        jobs["hold_running_jobs"] = True
        self.table.write_text(json.dumps(jobs))

    def refuse(self, message: str) -> None:
        jobs = json.loads(self.table.read_text())
        jobs["refuse"] = message
        self.table.write_text(json.dumps(jobs))

    def state(self, job_id: str) -> str:
        return json.loads(self.table.read_text())[job_id][0]

    def job_commands(self) -> list[str | None]:
        """``$REPLICA_STUDIO`` as each sbatch call got it (what the job's workers would run)."""
        text = self.commands_file.read_text() if self.commands_file.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line]

    def calls(self, name: str | None = None) -> list[list[str]]:
        calls = [json.loads(line) for line in self.calls_file.read_text().splitlines() if line]
        return [call for call in calls if name is None or call[0] == name]
