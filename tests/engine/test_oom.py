"""Out of memory in a step: named with the per-replica batch, the run fails resumable, and
``resume --set`` continues it with a smaller batch (the fault is injected: CPUs rarely OOM)."""
from __future__ import annotations

from pathlib import Path

from engine_helpers import EventTap, config_dict

from gui_app.core import rundir
from gui_app.engine.run.control import Control


def _run(argv):
    from gui_app.engine.commands.cli import build_parser
    from gui_app.engine.commands.train import run_command

    tap = EventTap()
    code = run_command(build_parser().parse_args([*argv, "--events", "jsonl"]), control=Control(), stream=tap)
    return code, tap


def test_oom_names_the_batch_and_resume_with_a_smaller_one(tmp_path, write_config, monkeypatch):
    import tensorflow as tf

    from gui_app.engine.training.loop import Trainer

    config = write_config(config_dict(training={"epochs": 2, "steps_per_call": 2, "checkpoint_every_steps": 4,
                                                "global_batch_size": 64}))
    real = Trainer.train
    calls = {"n": 0}

    def train(self, iterator, k):
        calls["n"] += 1
        if calls["n"] == 5:  # after the checkpoint at step 8
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[64,128]")
        return real(self, iterator, k)

    monkeypatch.setattr(Trainer, "train", train)
    code, tap = _run(["train", str(config), "--runs-dir", str(tmp_path)])
    assert code == 1
    message = tap.of("error")[0]["message"]
    assert message.startswith("out of memory with 32 examples per replica: ResourceExhaustedError: OOM")
    assert "resume with --set training.global_batch_size=32" in message and "disk" not in message
    run_dir = Path(tap.events[-1]["run_dir"])
    info = rundir.read_run(run_dir)
    assert info.status == "failed" and info.resumable and info.step == 8

    monkeypatch.setattr(Trainer, "train", real)
    code, tap = _run(["resume", str(run_dir), "--set", "training.global_batch_size=32",
                      "--set", "training.learning_rate=0.0005"])
    assert code == 0, tap.of("error")
    started = tap.of("run_started")[0]
    assert started["start_step"] == 8 and started["global_batch_size"] == 32
    assert started["config"]["training"]["learning_rate"] == 0.0005
    assert rundir.read_run(run_dir).status == "completed"
    assert rundir.read_run(run_dir).config.training.global_batch_size == 32  # config.json says what ran


def test_a_full_disk_is_never_called_out_of_memory():
    import tensorflow as tf

    from gui_app.engine.run.failures import BatchShape, one_line

    exc = tf.errors.ResourceExhaustedError(None, None, "runs/x/checkpoints/ckpt-8_temp; No space left on device")
    assert one_line(exc, Path("/runs/x"), BatchShape(32, 2)).startswith("the disk holding /runs/x is full")
    assert one_line(OSError(28, "No space left on device"), Path("/r")).startswith("the disk holding /r is full")
