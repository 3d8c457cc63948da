"""``evaluate BUNDLE`` and ``resume BUNDLE`` with the real engine: a run mailed as one file is
evaluated to the same figures as its folder, and a run stopped early continues from its
checkpoint in a new run folder of the runs folder; the bundle itself is only read."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest
from engine_helpers import LineReader, config_dict, parse_jsonl, run_cli

from gui_app.core import rundir
from gui_app.core.bundle import write_bundle
from gui_app.core.events import Step
from gui_app.identity import app_command, app_env

pytestmark = pytest.mark.slow


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_evaluate_a_bundle_gives_its_run_folders_figures(trained_run, tmp_path):
    (tmp_path / "mail").mkdir()
    bundle = write_bundle(trained_run, tmp_path / "mail" / "run.zip", with_model=True, with_checkpoints=True)
    sealed = _sha(bundle)
    folder = tmp_path / "copy"  # evaluate RUN_DIR writes into the folder: a copy of the shared run
    shutil.copytree(trained_run, folder)
    here = run_cli("evaluate", str(folder), "--events", "jsonl")
    assert here.returncode == 0, here.stderr[-2000:]
    mailed = run_cli("evaluate", str(bundle), "--events", "jsonl")
    assert mailed.returncode == 0, mailed.stderr[-2000:]
    out = tmp_path / "mail" / "run-evaluation"  # beside the bundle, by default
    assert f"run.zip checked; its evaluation goes to {out}" in mailed.stderr
    a, b = (next(e for e in parse_jsonl(p.stdout) if e["type"] == "eval") for p in (here, mailed))
    assert b["accuracy"] == a["accuracy"] and b["confusion_matrix"] == a["confusion_matrix"]
    assert b["examples"] == a["examples"] > 300
    assert json.loads((out / "eval.json").read_text())["accuracy"] == a["accuracy"]
    assert (out / "misclassified.npz").is_file() and rundir.read_run(out).test_accuracy == a["accuracy"]
    assert parse_jsonl(mailed.stdout)[-1]["run_dir"] == str(out)
    assert _sha(bundle) == sealed and sorted(p.name for p in bundle.parent.iterdir()) == ["run-evaluation",
                                                                                           "run.zip"]


def test_resume_a_bundle_continues_in_a_new_run_folder(tmp_path, write_config):
    config = write_config(config_dict(training={"epochs": 2, "steps_per_call": 2, "checkpoint_every_steps": 4}))
    proc = subprocess.Popen(app_command("train", str(config), "--runs-dir", str(tmp_path / "here"), "--events",
                                        "jsonl"), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=app_env())
    for event in LineReader(proc.stdout).events(timeout=120):
        if event["type"] == "checkpoint" and event["step"] >= 8:
            proc.kill()  # an interrupted run, with its checkpoints
            break
    proc.wait(timeout=30)
    original = rundir.list_runs(tmp_path / "here")[0]
    assert original.status == "interrupted" and original.resumable
    bundle = write_bundle(original.path, tmp_path / "mailed.zip", with_checkpoints=True)
    sealed = _sha(bundle)

    proc = run_cli("resume", str(bundle), "--runs-dir", str(tmp_path / "there"), "--events", "jsonl")
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = parse_jsonl(proc.stdout)
    started, finished = events[0], events[-1]
    assert started["type"] == "run_started" and started["resumed"] and started["start_step"] >= 8
    steps = [e["step"] for e in events if e["type"] == "step"]
    assert steps == list(range(started["start_step"] + 1, started["total_steps"] + 1))  # they continue
    assert finished["status"] == "completed" and finished["step"] == started["total_steps"]
    [resumed] = rundir.list_runs(tmp_path / "there")  # a real run folder the run list shows
    assert resumed.path.name == original.path.name and finished["run_dir"] == str(resumed.path)
    assert resumed.status == "completed" and (resumed.path / "model.keras").is_file()
    assert rundir.has_checkpoint(resumed.path)
    written = [e.step for e in rundir.read_raw_events(resumed.path, parts=False) if isinstance(e, Step)]
    assert written[0] == 1 and written[-1] == started["total_steps"]  # its history, then the resumed steps
    assert _sha(bundle) == sealed  # the bundle is only read
    assert rundir.read_run(original.path).status == "interrupted"  # and the folder it came from untouched
