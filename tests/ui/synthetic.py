"""Synthetic runs for previews, screenshots, tests and benchmarks, and the one preview entry
point for the chart tabs (Orange's ``WidgetPreview`` idea), outside the shipping package:

    python tests/ui/synthetic.py training|replicas|evaluation [--gpu] [--cifar100] [--dark]
                                 [--size WxH] [--screenshot PATH]
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Callable

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
if __name__ == "__main__":  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from gui_app.core import events as ev
from gui_app.core.gpu_monitor import GpuSample
from gui_app.core.history import RunHistory
from gui_app.core.metrics import per_class_metrics


def synthetic_events(steps: int = 600, epochs: int = 3, replicas: int = 2, *, seed: int = 0,
                     lr: float = 0.1, gpu: bool = False, classes: int = 10) -> list[ev.Event]:
    """A plausible run as docs/events.md describes it (previews and benchmarks); replica 1
    is about 15 % slower than the others so there is a slowest replica to show."""
    rng = np.random.default_rng(seed)
    kind = "GPU" if gpu else "CPU"
    devices = [f"/job:localhost/replica:0/task:0/device:{kind}:{i}" for i in range(replicas)]
    per_epoch = max(1, steps // epochs)
    events: list[ev.Event] = [ev.RunStarted(
        run_dir="", config={}, time=0.0, total_steps=steps, steps_per_epoch=per_epoch, epochs=epochs,
        num_replicas=replicas, replicas=[ev.ReplicaInfo(replica=i, device=d) for i, d in enumerate(devices)],
        global_batch_size=64 * replicas, per_replica_batch_size=64,
        dataset={"name": "digits", "class_names": [str(c) for c in range(classes)]})]
    for step in range(1, steps + 1):
        progress = step / steps
        loss = 2.3 * math.exp(-4 * progress) + 0.05
        rows = []
        for r in range(replicas):
            step_time = 0.02 * (1.15 if r == 1 else 1.0) * (1 + 0.1 * rng.random())
            rows.append(ev.ReplicaStats(
                replica=r, device=devices[r], loss=loss * (1 + 0.3 * rng.standard_normal()),
                accuracy=min(1.0, 1 - loss / 2.5 + 0.05 * rng.standard_normal()), examples=64,
                grad_norm=3 * loss * (1 + 0.2 * rng.random()), step_time=step_time, examples_per_sec=64 / step_time,
                memory_bytes=int(3e8 + 2e8 * r + 1e7 * rng.random()) if gpu else None,
                peak_memory_bytes=int(6e8 + 2e8 * r) if gpu else None))
        if gpu and (step == 1 or step % 50 == 0):  # NVML is sampled about once a second, not every step
            gpus = nvml_samples(replicas, progress, rng)
        events.append(ev.Step(
            time=step * 0.02, step=step, epoch=min(epochs, 1 + (step - 1) // per_epoch),
            loss=float(np.mean([row.loss for row in rows])), accuracy=float(np.mean([row.accuracy for row in rows])),
            learning_rate=lr * 0.5 * (1 + math.cos(math.pi * progress)),
            examples_per_sec=sum(row.examples_per_sec for row in rows),
            step_time=max(row.step_time for row in rows), replicas=rows, gpus=gpus if gpu else None))
        if step % per_epoch == 0 and step // per_epoch <= epochs:
            events.append(ev.EpochEnd(time=step * 0.02, epoch=step // per_epoch, step=step, loss=loss,
                                      accuracy=1 - loss / 2.5, val_loss=loss * 1.1, val_accuracy=1 - loss * 1.1 / 2.5,
                                      duration=1.0))
    events.append(ev.RunFinished(time=steps * 0.02, status="completed", step=steps))
    return events


def jsonl(events: list[ev.Event]) -> str:
    """The events as the lines of an events.jsonl."""
    return "".join(json.dumps(ev.encode(e)) + "\n" for e in events)


def nvml_samples(count: int, progress: float = 0.5, rng=None) -> list[GpuSample]:
    """One ``gpus`` list as gui_app.core.gpu_monitor samples it, for ``count`` cards; GPU 1 runs
    hot and the last card's memory is nearly full, so the panel has something to point at."""
    rng = rng or np.random.default_rng(0)
    total = 24 * 2**30
    out = []
    for i in range(count):
        full = i == count - 1 and count > 1
        out.append(GpuSample(index=i, name="NVIDIA GeForce RTX 4090" if i % 2 == 0 else "NVIDIA RTX A5000",
                             utilization=float(min(100, 70 + 25 * rng.random() - (30 if i == 2 else 0))),
                             memory_used=int(total * (0.97 if full else 0.4 + 0.1 * i)), memory_total=total,
                             temperature=float(round(60 + 10 * progress + (18 if i == 1 else 0))),
                             power=None if i == 2 else float(round(250 + 100 * rng.random(), 1))))
    return out


def folded(events: list[ev.Event]) -> RunHistory:
    """A run history holding ``events``."""
    history = RunHistory()
    history.add(events)
    return history


def run_preview(factory: Callable[[], object], events: list[ev.Event] | None = None) -> None:
    """Show one widget on its own, fed ``events`` live (added to its run history in small batches).

    ``--screenshot PATH`` feeds everything, saves a PNG and exits; ``--dark`` uses a dark
    palette; ``--size WxH`` sets the window size.
    """
    import argparse
    import sys

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    parser = argparse.ArgumentParser()
    parser.add_argument("--screenshot")
    parser.add_argument("--dark", action="store_true")
    parser.add_argument("--size", default="1000x620")
    args = parser.parse_args()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    if args.dark:
        app.setStyle("Fusion")
        app.setPalette(_dark_palette())
    widget = factory()
    width, height = (int(v) for v in args.size.split("x"))
    widget.resize(width, height)
    widget.show()
    events = events or []
    if args.screenshot:
        widget.history.add(events)
        app.processEvents()
        if hasattr(widget, "flush"):
            widget.flush()
        app.processEvents()
        widget.grab().save(args.screenshot)
        return
    batches = iter([events[i:i + 20] for i in range(0, len(events), 20)])

    def feed() -> None:
        batch = next(batches, None)
        if batch is None:
            timer.stop()
        else:
            widget.history.add(batch)

    timer = QTimer()
    timer.timeout.connect(feed)
    timer.start(20)
    app.exec()


def _dark_palette():
    from PySide6.QtGui import QColor, QPalette

    palette = QPalette()
    roles = {QPalette.ColorRole.Window: "#2b2b2b", QPalette.ColorRole.WindowText: "#e6e6e6",
             QPalette.ColorRole.Base: "#1e1e1e", QPalette.ColorRole.AlternateBase: "#2b2b2b",
             QPalette.ColorRole.Text: "#e6e6e6", QPalette.ColorRole.Button: "#353535",
             QPalette.ColorRole.ButtonText: "#e6e6e6", QPalette.ColorRole.Highlight: "#3d6fa8",
             QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.ToolTipBase: "#2b2b2b",
             QPalette.ColorRole.ToolTipText: "#e6e6e6"}
    for role, color in roles.items():
        palette.setColor(role, QColor(color))
    return palette


def preview_eval(classes: int = 10, seed: int = 0) -> tuple[ev.Eval, dict]:
    """A synthetic eval event and misclassified images (the preview, tests of the look)."""
    rng = np.random.default_rng(seed)
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    names = names if classes == 10 else [f"class {i}" for i in range(classes)]
    support = rng.integers(80, 120, classes)
    matrix = np.zeros((classes, classes), dtype=int)
    for i, n in enumerate(support):
        p = np.full(classes, 0.15 / (classes - 1))
        p[i] = 0.85
        matrix[i] = rng.multinomial(n, p)
    event = ev.decode({"type": "eval", "loss": 0.4213, "accuracy": float(np.trace(matrix) / matrix.sum()),
                       "examples": int(matrix.sum()), "confusion_matrix": matrix.tolist(), "class_names": names,
                       "per_class": per_class_metrics(matrix, names),
                       "examples_per_replica": [int(matrix.sum()) // 2, int(matrix.sum()) - int(matrix.sum()) // 2]})
    n = 40
    y_true = rng.integers(0, classes, n)
    misclassified = {"x": rng.integers(0, 255, (n, 32, 32, 3), dtype=np.uint8), "y_true": y_true,
                     "y_pred": (y_true + rng.integers(1, classes, n)) % classes, "confidence": rng.uniform(0.3, 1.0, n)}
    return event, misclassified


def main(argv: list[str]) -> None:
    from PySide6.QtWidgets import QWidget  # noqa: F401  (Qt before the tabs' pyqtgraph)

    tab = argv[0] if argv else "training"
    sys.argv = [sys.argv[0], *[a for a in argv[1:] if a not in ("--gpu", "--cifar100")]]
    if tab == "replicas":
        from gui_app.ui.tabs.replicas import ReplicasTab

        gpu = "--gpu" in argv
        run_preview(ReplicasTab, synthetic_events(steps=600, epochs=3, replicas=4 if gpu else 2, gpu=gpu))
    elif tab == "evaluation":
        from gui_app.ui.tabs.evaluation import EvaluationTab

        def make() -> EvaluationTab:
            view = EvaluationTab()
            view.show_eval(*preview_eval(100 if "--cifar100" in argv else 10))
            return view
        run_preview(make)
    else:
        from gui_app.ui.tabs.training import TrainingTab

        def make_training() -> TrainingTab:
            charts = TrainingTab()
            previous = folded(synthetic_events(steps=600, epochs=3, replicas=2, seed=7, lr=0.05))
            charts.set_overlay(previous.training, "previous run")
            return charts
        run_preview(make_training, synthetic_events(steps=600, epochs=3, replicas=2))


if __name__ == "__main__":
    main(sys.argv[1:])
