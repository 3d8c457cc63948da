"""Run folders for the report's tests, written as the engine writes them: two replicas with their
step times and input waits, an epoch's validation every ``steps_per_epoch`` steps, the test
evaluation with per-class figures, misclassified.npz and an export's model card kept in the folder;
a hostile name or message when asked, and a one-step spike in the loss."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gui_app.core import events as ev
from gui_app.core.config import RunConfig, RuntimeConfig, StrategyConfig
from gui_app.core.metrics import per_class_metrics

CONFIG = RunConfig(strategy=StrategyConfig(name="mirrored", devices=("CPU:0", "CPU:1")),
                   runtime=RuntimeConfig(cpu_devices=2))
DEVICES = [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(2)]
CLASSES = ["zero", "one", "two"]
TEST_ACCURACY = 0.8765
SPIKE = 987.5  # the loss of the spike step


def write_run(path: Path, steps: int = 40, steps_per_epoch: int = 10, spike_at: int | None = None,
              message: str | None = None, class_names: list[str] = CLASSES, status: str = "completed") -> Path:
    path.mkdir(parents=True)
    CONFIG.save(path / "config.json")
    t = 1.7e9
    lines = [ev.RunStarted(time=t, run_dir=str(path), config=CONFIG.to_dict(), total_steps=steps,
                           steps_per_epoch=steps_per_epoch, epochs=max(steps // steps_per_epoch, 1), num_replicas=2,
                           replicas=[ev.ReplicaInfo(replica=i, device=d) for i, d in enumerate(DEVICES)],
                           global_batch_size=64, per_replica_batch_size=32,
                           dataset={"name": "digits", "train_examples": 1438, "test_examples": 359},
                           model={"name": "mnist_cnn", "parameters": 12345},
                           versions={"tensorflow": "2.21.0", "keras": "3.15.0", "python": "3.11.2"})]
    rng = np.random.default_rng(0)
    for step in range(1, steps + 1):
        t += 0.05
        loss = SPIKE if step == spike_at else 2.0 / (1 + step / 100) + 0.05 * rng.random()
        # replica 1 is the slower one: 240 examples/s against 320
        replicas = [ev.ReplicaStats(replica=i, device=d, loss=loss * (1 + 0.1 * i), accuracy=0.5, examples=32,
                                    grad_norm=1.0 + i, step_time=0.06 + 0.02 * i, examples_per_sec=320.0 - 80 * i,
                                    memory_bytes=(100 + i) * 2**20)
                    for i, d in enumerate(DEVICES)]
        lines.append(ev.Step(time=t, step=step, epoch=1 + (step - 1) // steps_per_epoch, loss=loss,
                             accuracy=min(0.99, step / steps), learning_rate=0.001 * (1 - step / (2 * steps)),
                             examples_per_sec=560.0,
                             step_time=0.1, input_wait=0.01, replicas=replicas))
        if step % steps_per_epoch == 0:
            lines.append(ev.EpochEnd(time=t, epoch=step // steps_per_epoch, step=step, loss=loss,
                                     val_loss=1.0 / (1 + step), val_accuracy=min(0.95, step / steps)))
    if message is not None:
        lines.append(ev.Warning(time=t, message=message))
    matrix = [[40, 3, 2], [4, 35, 1], [2, 2, 30]]
    per_class = [ev.ClassMetrics(index=r["class"], name=r["name"], precision=r["precision"], recall=r["recall"],
                                 f1=r["f1"], support=r["support"]) for r in per_class_metrics(np.array(matrix),
                                                                                               class_names)]
    evaluation = ev.Eval(time=t + 1, loss=0.4, accuracy=TEST_ACCURACY, examples=119, confusion_matrix=matrix,
                         class_names=class_names, per_class=per_class, examples_per_replica=[60, 59])
    lines += [evaluation, ev.RunFinished(time=t + 2, status=status, run_dir=str(path), step=steps, message=message)]
    (path / "events.jsonl").write_text("".join(json.dumps(ev.encode(e)) + "\n" for e in lines))
    (path / "eval.json").write_text(json.dumps({k: v for k, v in ev.encode(evaluation).items()
                                                if k not in ("type", "time")}))
    images = (rng.random((5, 8, 8)) * 255).astype(np.uint8)
    np.savez_compressed(path / "misclassified.npz", x=images, y_true=np.array([0, 1, 2, 0, 1]),
                        y_pred=np.array([1, 2, 0, 2, 0]), confidence=np.full(5, 0.75), index=np.arange(5))
    card = {"schema_version": 1, "format": "tflite-int8", "format_label": "TFLite (int8)", "file": "model-int8.tflite",
            "size_bytes": 31_000, "parity": {"format": "tflite-int8", "runtime": "litert", "examples": 256,
                                             "max_abs_diff": 0.0123, "mean_abs_diff": 0.001, "top1_agreement": 0.9961,
                                             "accuracy": 0.8711, "reference_accuracy": 0.875,
                                             "criterion": "top-1 agreement >= 99%", "passed": True}}
    (path / "exports").mkdir()
    (path / "exports" / "model-int8.tflite.json").write_text(json.dumps(card))
    return path
