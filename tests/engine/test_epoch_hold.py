"""``train --pause-after-each-epoch`` (engine/training/actions/epoch_hold.py): the run waits at
each epoch's end, after its validation, until ``continue`` arrives on its control channel -- what
a sweep needs to prune a trial before its next epoch."""
from __future__ import annotations

import json
import time

from engine_helpers import config_dict, run_cli, start_engine

from gui_app.engine.run.control_fifo import send

EPOCHS = 3


def test_the_run_waits_at_each_epoch_end_until_continued(tmp_path):
    config = tmp_path / "run.json"
    config.write_text(json.dumps(config_dict(training={"epochs": EPOCHS, "global_batch_size": 128, "seed": 1})))
    proc, reader = start_engine("train", str(config), "--runs-dir", str(tmp_path / "runs"), "--events", "jsonl",
                                "--pause-after-each-epoch", stdin=False)
    try:
        seen: list[dict] = []
        held_at = []
        for event in reader.events(timeout=180):
            seen.append(event)
            if event["type"] == "paused":
                held_at.append(event["step"])
                time.sleep(0.5)  # a run that did not wait would train on meanwhile (checked below)
                run_dir = next(e["run_dir"] for e in seen if e["type"] == "run_started")
                send(run_dir, "continue")
            if event["type"] == "run_finished":
                break
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    per_epoch = next(e for e in seen if e["type"] == "run_started")["steps_per_epoch"]
    # Held after epochs 1 and 2, each right after its epoch_end (the validation done); not after the last.
    assert held_at == [per_epoch, 2 * per_epoch]
    kinds = [e["type"] for e in seen if e["type"] in ("epoch_end", "paused", "continued", "steps")]
    for index, kind in enumerate(kinds):
        if kind == "paused":
            assert kinds[index - 1] == "epoch_end" and kinds[index + 1] == "continued"
    assert seen[-1]["status"] == "completed" and sum(e["type"] == "epoch_end" for e in seen) == EPOCHS


def test_a_cluster_run_refuses_it_in_one_line(tmp_path):
    config = tmp_path / "run.json"
    config.write_text(json.dumps(config_dict(strategy={"name": "multi_worker_mirrored", "workers": 2, "devices": []})))
    done = run_cli("train", str(config), "--runs-dir", str(tmp_path / "runs"), "--pause-after-each-epoch")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "--pause-after-each-epoch: works for one process's strategies, not 'multi_worker_mirrored'")
