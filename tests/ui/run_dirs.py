"""Write run directories the way the engine does, for tests of the run list and of opening runs."""
from __future__ import annotations

import json
from pathlib import Path

from gui_app.core.config import RunConfig, RuntimeConfig, StrategyConfig

CONFIG = RunConfig(strategy=StrategyConfig(name="mirrored", devices=("CPU:0", "CPU:1")),
                   runtime=RuntimeConfig(cpu_devices=2))


def write_run(runs_dir: Path, name: str, status: str | None, steps: int = 10, started: float = 1.7e9,
              message: str | None = None, checkpoint: bool = True, accuracy: float | None = None) -> Path:
    """``status`` None leaves the run without run_finished (it died: "interrupted")."""
    run = runs_dir / name
    run.mkdir(parents=True)
    CONFIG.save(run / "config.json")
    replicas = [{"replica": i, "device": f"/job:localhost/replica:0/task:0/device:CPU:{i}"} for i in range(2)]
    events = [{"type": "run_started", "time": started, "run_dir": str(run), "resumed": False, "start_step": 0,
               "total_steps": 20, "steps_per_epoch": 10, "epochs": 2, "num_replicas": 2, "replicas": replicas}]
    for step in range(1, steps + 1):
        events.append({"type": "step", "time": started + step, "step": step, "epoch": 1, "loss": 1.0 / step,
                       "accuracy": 0.5, "learning_rate": 0.001, "examples_per_sec": 100.0, "step_time": 0.1,
                       "replicas": [{**r, "loss": 1.0 / step, "accuracy": 0.5, "examples": 32, "grad_norm": 1.0,
                                     "step_time": 0.1, "examples_per_sec": 320.0} for r in replicas]})
    if accuracy is not None:
        matrix = [[5, 0], [1, 4]]
        evaluation = {"loss": 0.2, "accuracy": accuracy, "examples": 10, "confusion_matrix": matrix,
                      "class_names": ["a", "b"], "per_class": [], "examples_per_replica": [5, 5]}
        events.append({"type": "eval", "time": started + steps + 1, **evaluation})
        (run / "eval.json").write_text(json.dumps(evaluation))
    if status is not None:
        events.append({"type": "run_finished", "time": started + steps + 2, "status": status, "run_dir": str(run),
                       "step": steps, **({"message": message} if message else {})})
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    if checkpoint:
        (run / "checkpoints").mkdir()
    return run


def wait_listed(qtbot, panel, timeout: int = 30_000) -> None:
    """Until the RunsPanel's fill (on its reader thread) has ended: the rows are as on disk."""
    qtbot.waitUntil(lambda: not panel.is_filling(), timeout=timeout)


def train_to_end(qtbot, window, timeout: int) -> tuple[dict, str]:
    """Press Train in ``window`` and wait until the run has ended; its ``run_started`` event and
    run directory. Fails with the engine's message unless the run completed."""
    with qtbot.waitSignal(window.supervisor.run_started, timeout=timeout) as started, \
            qtbot.waitSignal(window.supervisor.finished, timeout=timeout) as finished:
        window.actions.train.trigger()
    status, run_dir, message = finished.args
    assert (status, message) == ("completed", ""), message
    return started.args[0], run_dir
