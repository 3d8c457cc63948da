"""A straggler made by the OS: a worker's process put in a cgroup v1 CPU quota mid-run (a fifth of a
CPU), over a config whose steps are mostly compute, and the straggler ``diagnose`` then names.

A quota, not a hog beside it: the scheduler favours a process that wakes from the network over a
busy loop, so a pinned hog barely slowed a worker's pass here."""
from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gui_app.core import rundir
from gui_app.core.diagnosis import diagnose
from gui_app.identity import app_command

CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller


def cgroup_quota_works() -> bool:
    return (CPU_CGROUPS / "cgroup.procs").is_file() and os.access(CPU_CGROUPS, os.W_OK)


def synthetic_npz(path: Path, n: int = 3000) -> Path:
    """28x28 images of noise: a pass of tens of ms per step, so compute is most of a step here."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (n, 28, 28, 1), dtype=np.uint8)
    y = rng.integers(0, 10, n).astype(np.int64)
    np.savez(path, x_train=x, y_train=y, x_test=x[:200], y_test=y[:200])
    return path


def compute_bound(config: Path, data_file: Path) -> Path:
    """``config`` rewritten to train a CNN on ``data_file`` (synthetic_npz) with a global batch of 128."""
    data = json.loads(config.read_text())
    data["dataset"] = {"name": "npz", "path": str(data_file), "validation": "none"}
    data["model"] = {"name": "mnist_cnn"}
    data["training"]["global_batch_size"] = 128
    config.write_text(json.dumps(data))
    return config


class FifthOfACpu:
    """An ``on_event`` hook: once the chief told step 3, the process ``pick(launched)`` gets 2 ms of
    CPU every 10, until the run's last step; ``finding_after`` is then the seconds until ``diagnose``
    first named a straggler (None: not during the run).

    The quota ends with the last step, not the run: the final checkpoint and the workers' farewell
    at a fifth of a CPU took 30 s here, and over 200 s on a busier machine, while adding nothing
    that ``diagnose`` reads."""

    _made = 0

    def __init__(self, runs_dir: Path, pick: Callable[[object], int]):
        self.runs_dir, self.pick = runs_dir, pick
        FifthOfACpu._made += 1  # one group per quota: a group left busy never meets the next test
        self.group = CPU_CGROUPS / f"replica-studio-test-{os.getpid()}-{FifthOfACpu._made}"
        self.total_steps = 0
        self.slowed_at: float | None = None
        self.finding_after: float | None = None

    def hook(self, launched, event) -> None:
        if event["type"] == "run_started":
            self.total_steps = event["total_steps"]
        if event["type"] != "step":
            return
        if self.slowed_at is None and event["step"] >= 3:
            self.group.mkdir()
            (self.group / "cpu.cfs_period_us").write_text("10000")
            (self.group / "cpu.cfs_quota_us").write_text("2000")
            (self.group / "cgroup.procs").write_text(str(self.pick(launched)))
            self.slowed_at = time.monotonic()
        elif self.slowed_at is not None and self.finding_after is None:
            run_dir = rundir.list_runs(self.runs_dir)[0].path
            if any(f.kind == "straggler" for f in diagnose(run_dir).findings):
                self.finding_after = time.monotonic() - self.slowed_at
        if self.slowed_at is not None and event["step"] >= self.total_steps > 0:
            self.lift()

    def lift(self) -> None:
        """Every process still in the group back to the root group, whose CPU is not limited."""
        if not self.group.exists():
            return
        for pid in (self.group / "cgroup.procs").read_text().split():
            try:
                (CPU_CGROUPS / "cgroup.procs").write_text(pid)
            except ProcessLookupError:  # it ended meanwhile
                pass

    def remove(self) -> None:
        """The group lifted and deleted: a process that outlived the test (a worker of a launcher
        killed at its timeout) must not keep it busy."""
        if not self.group.exists():
            return
        self.lift()
        for _ in range(50):  # the kernel lets go of a group a moment after its last task left
            try:
                self.group.rmdir()
                return
            except OSError:
                time.sleep(0.1)
        self.group.rmdir()


def diagnosed_straggler(runs_dir: Path, env: dict) -> dict:
    """The one straggler ``diagnose --json`` names in the run of ``runs_dir``."""
    run_dir = rundir.list_runs(runs_dir)[0].path
    done = subprocess.run(app_command("diagnose", str(run_dir), "--json"), capture_output=True, text=True,
                          timeout=60, env=env)
    found = [f for f in json.loads(done.stdout)["findings"] if f["kind"] == "straggler"]
    assert len(found) == 1, done.stdout
    return found[0]
