"""A full or unwritable disk, on real small tmpfs mounts (root only; skipped otherwise)."""
from __future__ import annotations

import errno
import json
import subprocess
from pathlib import Path

import pytest
from engine_helpers import config_dict, run_cli, start_engine

from gui_app.core import rundir


def _mount(path: Path, options: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                          text=True, timeout=30)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or 'not root'})")
    return path


@pytest.fixture
def tmpfs(tmp_path):
    mounted = []

    def make(name: str, options: str) -> Path:
        mounted.append(_mount(tmp_path / name, options))
        return mounted[-1]

    yield make
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def _fill(folder: Path) -> Path:
    """Take every free byte of ``folder``'s file system."""
    filler = folder / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_unwritable_or_too_small_runs_folder_is_refused_before_training(tmpfs, write_config):
    config = write_config(config_dict(training={"epochs": 1}))
    readonly = tmpfs("ro", "size=1m,ro")
    proc = run_cli("train", str(config), "--runs-dir", str(readonly), "--events", "none", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"replica-studio train: --runs-dir: cannot write in {readonly}: Read-only file system"]
    small = tmpfs("small", "size=1m")
    proc = run_cli("train", str(config), "--runs-dir", str(small), "--events", "none", timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "free but one checkpoint and the saved model needs about" in line and "out of memory" not in line
    assert not list(small.glob("*/checkpoints"))


def test_disk_full_mid_run_names_the_disk_and_resume_works_once_freed(tmpfs, write_config):
    disk = tmpfs("disk", "size=16m")
    config = write_config(config_dict(training={"epochs": 30, "steps_per_call": 2, "checkpoint_every_steps": 4}))
    proc, reader = start_engine("train", str(config), "--runs-dir", str(disk), "--events", "jsonl", stdin=False)
    filler, saved = None, None
    for event in reader.events(timeout=120):
        if event["type"] == "checkpoint" and filler is None:
            saved = event["step"]
            filler = _fill(disk)
    code = proc.wait(timeout=60)
    stderr = proc.stderr.read()
    run_dir = rundir.list_runs(disk)[0].path
    assert code == 1, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.startswith("replica-studio")]
    assert lines == [f"replica-studio train: the disk holding {run_dir} is full; earlier checkpoints are kept: "
                     "free some space, then resume the run"]
    assert "out of memory" not in stderr
    assert (run_dir / "checkpoints" / f"ckpt-{saved}.index").is_file()
    info = rundir.read_run(run_dir)
    assert info.status in ("failed", "interrupted") and info.resumable  # run_finished may not fit either
    filler.unlink()
    proc = run_cli("resume", str(run_dir), "--events", "jsonl", "--set", "training.epochs=1", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert rundir.read_run(run_dir).status == "completed"


def test_the_events_file_after_a_full_disk_and_resume_holds_each_step_once(tmpfs, write_config):
    """The file itself, read line by line (not through rundir's readers, which would hide a torn
    line or a step twice): after the disk filled mid-run, no line is torn; after resume, each
    step and each epoch's end is there once, in order."""
    disk = tmpfs("disk", "size=16m")
    config = write_config(config_dict(training={"epochs": 2, "steps_per_call": 2, "checkpoint_every_steps": 4}))
    proc, reader = start_engine("train", str(config), "--runs-dir", str(disk), "--events", "jsonl", stdin=False)
    filler = saved = None
    for event in reader.events(timeout=120):
        if event["type"] == "checkpoint" and filler is None:
            saved = event["step"]
            filler = _fill(disk)
    assert proc.wait(timeout=60) == 1, proc.stderr.read()[-2000:]
    run_dir = rundir.list_runs(disk)[0].path
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]  # none torn
    written = [e["step"] for e in events if e["type"] == "step"]
    assert written == list(range(1, written[-1] + 1)) and written[-1] >= saved
    filler.unlink()
    proc = run_cli("resume", str(run_dir), "--events", "jsonl", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    started = json.loads(proc.stdout.splitlines()[0])
    assert started["start_step"] == saved
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["type"] == "step"] == list(range(1, started["total_steps"] + 1))
    assert [e["epoch"] for e in events if e["type"] == "epoch_end"] == [1, 2]
    assert [e["type"] for e in events].count("run_started") == 2 and events[-1]["status"] == "completed"
