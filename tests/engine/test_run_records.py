"""The engine keeps the run's history at several resolutions and its summary.json as it writes the
events (gui_app/engine/run/records.py): during a real short run both cover the events written so
far, and after a stop and a resume from an older checkpoint both equal what a reader rebuilds
from the events alone."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from engine_helpers import config_dict, run_in_process

from gui_app.core import rundir
from gui_app.core.history.pyramid import FOLDER, Meta, read_level
from gui_app.core.history.pyramid_files import update_pyramid
from gui_app.engine.run.control import Control

pytestmark = pytest.mark.slow


def _damage(run_dir, step):
    """The newest checkpoint unreadable: the resume goes on from the one before."""
    data = next((run_dir / "checkpoints").glob(f"ckpt-{step}.data-*"))
    blob = bytearray(data.read_bytes())
    blob[len(blob) // 3: len(blob) // 3 + 256] = b"\xff" * 256
    data.write_bytes(bytes(blob))


def test_the_engine_keeps_the_history_and_summary_beside_the_events(tmp_path, write_config):
    config = write_config(config_dict(training={"epochs": 2, "global_batch_size": 8, "steps_per_call": 2,
                                                "checkpoint_every_steps": 100}))
    control, seen = Control(), {}

    def on_event(event):
        if event["type"] == "run_started":
            seen["run"] = rundir.Path(event["run_dir"])
        if event["type"] == "step" and event["step"] == 270:  # while it runs
            run = seen["run"]
            seen["meta"] = Meta.read(run / FOLDER)
            seen["summary"] = json.loads((run / rundir.SUMMARY_FILE).read_text())
            seen["size"] = (run / rundir.EVENTS_FILE).stat().st_size
        if event["type"] == "step" and event["step"] >= 300:
            control.command("stop")

    code, tap = run_in_process("train", config, tmp_path / "runs", control=control, on_event=on_event)
    assert code == 0 and tap.events[-1]["status"] == "stopped"
    run, stopped = seen["run"], tap.events[-1]["step"]
    # meta.json is written at checkpoints (the one at step 200) and every few seconds after a bucket
    assert seen["meta"] is not None and seen["meta"].last_step >= 200 and seen["meta"].end <= seen["size"]
    assert seen["summary"]["state"]["status"] == "interrupted"  # running: no run_finished yet
    assert 0 < seen["summary"]["offset"] <= seen["size"]

    _damage(run, stopped)
    code, tap = run_in_process("resume", run)
    assert code == 0 and tap.events[-1]["status"] == "completed"
    start = tap.of("run_started")[0]["start_step"]
    assert start < stopped  # the resume cut the history it had written after its checkpoint

    meta = Meta.read(run / FOLDER)
    size = (run / rundir.EVENTS_FILE).stat().st_size
    assert meta is not None and meta.end == size and meta.inode == (run / rundir.EVENTS_FILE).stat().st_ino
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(run / rundir.EVENTS_FILE, copy / rundir.EVENTS_FILE)
    rebuilt = update_pyramid(copy, copy / rundir.EVENTS_FILE)
    assert rebuilt is not None and rebuilt.columns == meta.columns and rebuilt.counts == meta.counts
    for level in meta.counts:
        kept, again = read_level(run / FOLDER, level, meta), read_level(copy / FOLDER, level, rebuilt)
        assert kept["last_step"].tolist() == again["last_step"].tolist()
        np.testing.assert_allclose(kept["stats"], again["stats"], rtol=1e-6, equal_nan=True)

    summary = json.loads((run / rundir.SUMMARY_FILE).read_text())
    assert summary["offset"] == size
    (run / rundir.SUMMARY_FILE).unlink()
    assert rundir.summarize_events(run).step == summary["state"]["step"] == tap.events[-1]["step"]
    assert json.loads((run / rundir.SUMMARY_FILE).read_text())["state"] == summary["state"]
