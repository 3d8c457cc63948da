"""Run directories for the comparison's tests (the core and the window's dialog): a config with a
learning rate and a seed, steps whose loss is ``lr * 100 / step + seed``, an epoch every 5 steps,
the test evaluation -- written as the engine writes them."""
from __future__ import annotations

import json
from pathlib import Path

from gui_app.core import events as ev
from gui_app.core.config import RunConfig


def write_run(path: Path, lr: float, seed: int, val: float, test: float, steps: int = 10, resumed_at: int = 0) -> Path:
    """A run directory as the engine writes it: config, events (one epoch per 5 steps), eval.json."""
    config = RunConfig().replace(training={"learning_rate": lr, "seed": seed})
    path.mkdir(parents=True)
    config.save(path / "config.json")
    t = 1000.0
    events: list[ev.Event] = [ev.RunStarted(time=t, run_dir=str(path), config=config.to_dict(), total_steps=steps)]
    for step in range(1, steps + 1):
        if resumed_at and step == resumed_at + 1:  # killed, then resumed an hour later from step resumed_at
            t += 3600
            events.append(ev.RunStarted(time=t, run_dir=str(path), config=config.to_dict(), resumed=True))
        t += 1
        events.append(ev.Step(time=t, step=step, epoch=1 + (step - 1) // 5, loss=lr * 100 / step + seed,
                              accuracy=val * step / steps))
        if step % 5 == 0:
            events.append(ev.EpochEnd(time=t, epoch=step // 5, step=step, val_accuracy=val * step / steps,
                                      val_loss=1 - val * step / steps))
    evaluation = ev.Eval(time=t + 1, accuracy=test, loss=0.1)
    events += [evaluation, ev.RunFinished(time=t + 2, status="completed", run_dir=str(path), step=steps)]
    (path / "events.jsonl").write_text("".join(json.dumps(ev.encode(e)) + "\n" for e in events))
    (path / "eval.json").write_text(json.dumps({k: v for k, v in ev.encode(evaluation).items()
                                                if k not in ("type", "time")}))
    return path
