"""The engine in-process on two logical CPU replicas: stop/resume, determinism, failures."""
from __future__ import annotations

import json

import numpy as np
import pytest
from engine_helpers import config_dict, run_in_process

from gui_app.core import events as ev
from gui_app.core import rundir
from gui_app.engine.run.control import Control

SMALL = {"epochs": 2, "global_batch_size": 64, "seed": 3, "steps_per_call": 4}


def _losses(tap) -> dict[int, float]:
    return {e["step"]: e["loss"] for e in tap.of("step")}


def test_stop_then_resume_matches_an_uninterrupted_run(tmp_path, write_config):
    config = write_config(config_dict(training=SMALL))
    code, full = run_in_process("train", config, tmp_path / "a")
    assert code == 0
    total = full.of("run_started")[0]["total_steps"]
    assert total == 2 * (1294 // 64)

    control = Control()
    stop_after = 9

    def stop_when(event):
        if event["type"] == "step" and event["step"] >= stop_after:
            control.command("stop")

    code, first = run_in_process("train", config, tmp_path / "b", on_event=stop_when, control=control)
    assert code == 0
    finished = first.events[-1]
    assert finished["type"] == "run_finished" and finished["status"] == "stopped"
    stopped_at = finished["step"]
    assert stop_after <= stopped_at < total
    assert first.of("checkpoint")[-1]["step"] == stopped_at
    assert not first.of("eval")  # a stopped run evaluates nothing
    run_dir = rundir.list_runs(tmp_path / "b")[0]
    assert run_dir.status == "stopped" and run_dir.resumable

    code, second = run_in_process("resume", run_dir.path)
    assert code == 0
    started = second.of("run_started")[0]
    assert started["resumed"] is True and started["start_step"] == stopped_at
    assert second.events[-1]["status"] == "completed" and second.events[-1]["step"] == total
    assert [e["step"] for e in second.of("step")] == list(range(stopped_at + 1, total + 1))

    # Same seed, same data position, same weights: the resumed steps equal the uninterrupted ones.
    expected, resumed = _losses(full), _losses(second)
    for step in resumed:
        assert resumed[step] == pytest.approx(expected[step], rel=1e-5, abs=1e-6)
    assert second.of("eval")[0]["accuracy"] == pytest.approx(full.of("eval")[0]["accuracy"], abs=1e-6)

    # One events.jsonl holds both processes' events; the run now reads as completed.
    on_disk = list(rundir.read_events(run_dir.path))
    assert [type(e) for e in on_disk].count(ev.RunStarted) == 2
    assert rundir.read_run(run_dir.path).status == "completed"


def test_steps_per_call_does_not_change_the_numbers(tmp_path, write_config):
    one = write_config(config_dict(training={**SMALL, "epochs": 1, "steps_per_call": 1}), "one.json")
    many = write_config(config_dict(training={**SMALL, "epochs": 1, "steps_per_call": 7}), "many.json")
    _, a = run_in_process("train", one, tmp_path / "one")
    _, b = run_in_process("train", many, tmp_path / "many")
    la, lb = _losses(a), _losses(b)
    assert la.keys() == lb.keys() and len(la) == 1294 // 64
    assert np.allclose([la[k] for k in la], [lb[k] for k in la], rtol=1e-5)


def test_per_replica_statistics_are_local(tmp_path, write_config):
    config = write_config(config_dict(training={**SMALL, "epochs": 1}))
    code, tap = run_in_process("train", config, tmp_path)
    assert code == 0
    steps = tap.of("step")
    devices = [r["device"] for r in tap.of("run_started")[0]["replicas"]]
    assert devices[0].endswith("CPU:0") and devices[1].endswith("CPU:1")
    for event in steps:
        reps = event["replicas"]
        assert [r["replica"] for r in reps] == [0, 1]
        assert not any("device" in r for r in reps)  # named once, by run_started (protocol 3)
        assert sum(r["examples"] for r in reps) == 64
        assert all(r["grad_norm"] > 0 and r["step_time"] > 0 and r["examples_per_sec"] > 0 for r in reps)
        # The global loss is the example-weighted mean of the local ones.
        assert event["loss"] == pytest.approx(np.mean([r["loss"] for r in reps]), rel=1e-5)
    differing = sum(abs(e["replicas"][0]["loss"] - e["replicas"][1]["loss"]) > 1e-4 for e in steps)
    assert differing >= len(steps) - 1  # each replica saw its own half of the batch


def test_nan_loss_fails_and_keeps_the_last_good_checkpoint(tmp_path, write_config):
    # Plain SGD with an absurd rate overflows within the second epoch at the latest.
    config = write_config(config_dict(training={**SMALL, "epochs": 3, "optimizer": "sgd",
                                                "learning_rate": 1e4, "checkpoint_every_steps": 2}))
    code, tap = run_in_process("train", config, tmp_path)
    assert code == 1
    error = tap.of("error")[0]
    assert error["kind"] == "training" and "NaN or infinite" in error["message"]
    finished = tap.events[-1]
    assert finished["type"] == "run_finished" and finished["status"] == "failed"
    run_dir = rundir.list_runs(tmp_path)[0].path
    assert not (run_dir / rundir.MODEL_FILE).exists()
    saved = [e["step"] for e in tap.of("checkpoint")]
    bad_step = int(error["message"].split("at step ")[1].split(";")[0])
    assert all(s < bad_step for s in saved)
    # The message names the checkpoint really kept (or says there is none), and it is finite.
    if saved:
        assert f"the last good checkpoint, of step {saved[-1]} (" in error["message"]
        import tensorflow as tf

        reader = tf.train.load_checkpoint(str(run_dir / rundir.CHECKPOINT_DIR))
        weights = [reader.get_tensor(k) for k, dtype in reader.get_variable_to_dtype_map().items()
                   if dtype.is_floating]
        assert weights and all(np.isfinite(w).all() for w in weights)
    else:
        assert "no checkpoint was written before it, so there is nothing to resume" in error["message"]


def test_the_diverging_run_of_the_design_notes_says_it_kept_no_checkpoint(tmp_path, write_config):
    """SGD at learning rate 50 on digits goes non-finite within the first epoch, before any
    checkpoint: the message must not promise a "last good checkpoint" that does not exist."""
    config = write_config(config_dict(training={**SMALL, "epochs": 2, "optimizer": "sgd", "learning_rate": 50.0}))
    code, tap = run_in_process("train", config, tmp_path)
    assert code == 1 and tap.of("checkpoint") == []
    message = tap.of("error")[0]["message"]
    assert "NaN or infinite" in message and "no checkpoint was written before it" in message, message
    assert not (rundir.list_runs(tmp_path)[0].path / rundir.CHECKPOINT_DIR).is_dir() or not any(
        (rundir.list_runs(tmp_path)[0].path / rundir.CHECKPOINT_DIR).glob("ckpt-*"))


def test_evaluate_command_rewrites_eval_json(tmp_path, write_config):
    config = write_config(config_dict(training={**SMALL, "epochs": 1}))
    _, tap = run_in_process("train", config, tmp_path)
    run_dir = rundir.list_runs(tmp_path)[0].path
    (run_dir / rundir.EVAL_FILE).unlink()
    code, again = run_in_process("evaluate", run_dir)
    assert code == 0
    evaluation = json.loads((run_dir / rundir.EVAL_FILE).read_text())
    assert evaluation["accuracy"] == pytest.approx(tap.of("eval")[0]["accuracy"], abs=1e-6)
    assert again.events[-1]["type"] == "run_finished"
    assert again.events[-1]["step"] == tap.of("run_finished")[0]["step"] > 0  # the run's step, not the model file's 0
    # Re-evaluating does not change how the run ended.
    assert rundir.read_run(run_dir).status == "completed"


@pytest.mark.parametrize("sections, kind, key", [
    ({"strategy": {"devices": ["CPU:0", "GPU:0"]}}, "config", "strategy.devices: GPU:0 does not exist"),
    ({"training": {"global_batch_size": 5000}}, "config", "training.global_batch_size"),
    ({"model": {"name": "cifar_cnn"}}, "input", "model.name: cifar_cnn cannot take 8x8x1"),
    ({"dataset": {"name": "npz", "path": "/nonexistent/data.npz"}}, "input", "/nonexistent/data.npz"),
])
def test_bad_input_is_one_clear_error(tmp_path, write_config, sections, kind, key):
    config = write_config(config_dict(**sections))
    code, tap = run_in_process("train", config, tmp_path)
    assert code == 2
    error = tap.of("error")[0]
    assert error["kind"] == kind and key in error["message"]
    assert "\n" not in error["message"]
    assert tap.events[-1]["status"] == "failed" and not tap.of("step")


def test_resume_refuses_a_completed_run(tmp_path, write_config):
    config = write_config(config_dict(training={**SMALL, "epochs": 1}))
    run_in_process("train", config, tmp_path)
    run_dir = rundir.list_runs(tmp_path)[0].path
    code, tap = run_in_process("resume", run_dir)
    assert code == 2 and "already completed" in tap.of("error")[0]["message"]
