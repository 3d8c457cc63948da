"""Write run directories the way the engine does, for tests of the run list and of opening runs."""
from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt

from gui_app.core import events as ev
from gui_app.core.config import RunConfig, RuntimeConfig, StrategyConfig

CONFIG = RunConfig(strategy=StrategyConfig(name="mirrored", devices=("CPU:0", "CPU:1")),
                   runtime=RuntimeConfig(cpu_devices=2))


def write_run(runs_dir: Path, name: str, status: str | None, steps: int = 10, started: float = 1.7e9,
              message: str | None = None, checkpoint: bool = True, accuracy: float | None = None) -> Path:
    """``status`` None leaves the run without run_finished (it died: "interrupted")."""
    run = runs_dir / name
    run.mkdir(parents=True)
    CONFIG.save(run / "config.json")
    devices = [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(2)]
    events: list[ev.Event] = [ev.RunStarted(
        time=started, run_dir=str(run), config=CONFIG.to_dict(), total_steps=20, steps_per_epoch=10, epochs=2,
        num_replicas=2, replicas=[ev.ReplicaInfo(replica=i, device=d) for i, d in enumerate(devices)])]
    for step in range(1, steps + 1):
        events.append(ev.Step(
            time=started + step, step=step, epoch=1, loss=1.0 / step, accuracy=0.5, learning_rate=0.001,
            examples_per_sec=100.0, step_time=0.1,
            replicas=[ev.ReplicaStats(replica=i, device=d, loss=1.0 / step, accuracy=0.5, examples=32, grad_norm=1.0,
                                      step_time=0.1, examples_per_sec=320.0) for i, d in enumerate(devices)]))
    if accuracy is not None:
        evaluation = ev.Eval(time=started + steps + 1, loss=0.2, accuracy=accuracy, examples=10,
                             confusion_matrix=[[5, 0], [1, 4]], class_names=["a", "b"], examples_per_replica=[5, 5])
        events.append(evaluation)
        (run / "eval.json").write_text(json.dumps({k: v for k, v in ev.encode(evaluation).items()
                                                   if k not in ("type", "time")}))
    if status is not None:
        events.append(ev.RunFinished(time=started + steps + 2, status=status, run_dir=str(run), step=steps,
                                     message=message))
    (run / "events.jsonl").write_text("".join(json.dumps(ev.encode(e)) + "\n" for e in events))
    if checkpoint:
        (run / "checkpoints").mkdir()
    return run


def listed_status(panel, run_dir: str | Path) -> str | None:
    """A run's status as its row in the run list shows it: the Status column, without the
    "(step/total)" of a run that can be resumed; None when the run is not listed."""
    tree = panel.tree
    for i in range(tree.topLevelItemCount()):
        item = tree.topLevelItem(i)
        if item.data(0, Qt.ItemDataRole.UserRole) == str(Path(run_dir)):
            return item.text(0).split(" (")[0]
    return None


def wait_listed(qtbot, panel, timeout: int = 30_000) -> None:
    """Until the RunsPanel's fill (on its reader thread) has ended: the rows are as on disk."""
    qtbot.waitUntil(lambda: not panel.is_filling(), timeout=timeout)


def train_to_end(qtbot, window, timeout: int) -> tuple[ev.RunStarted, str]:
    """Press Train in ``window`` once the check of the forms' dataset and model has passed (Train
    waits for it), and wait until the run has ended; its ``run_started`` event and run directory.
    Fails with the engine's message unless the run completed."""
    qtbot.waitUntil(window.window_actions.train.isEnabled, timeout=timeout)
    with qtbot.waitSignal(window.supervisor.run_started, timeout=timeout) as started, \
            qtbot.waitSignal(window.supervisor.finished, timeout=timeout) as finished:
        window.window_actions.train.trigger()
    status, run_dir, message = finished.args
    assert (status, message) == ("completed", ""), message
    return started.args[0], run_dir
