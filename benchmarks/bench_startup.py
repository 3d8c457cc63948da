"""Launch to first painted window: Replica Studio against a bare Qt window, same run, same machine.

    python benchmarks/bench_startup.py [--repeats 5] [--command dist/replica-studio/replica-studio]

Every launch is a fresh process. The parent reads ``time.monotonic()`` just before starting
it; the child prints ``time.monotonic()`` once its main window has been painted (the app via
``replica-studio --measure-startup``; the baseline is a QApplication showing one empty
1200x800 QWidget, the least any Qt window costs). Both read the system's monotonic clock, so
the difference covers interpreter start-up, imports, building the window and its first paint.
The ratio app/baseline is what to watch; seconds depend on the machine. ``import tensorflow``
is timed for reference: the window must not wait for it (design.md: TensorFlow loads in the
engine process, in the background). Each app launch gets fresh settings (the first-run
setup) in a temporary folder. Offscreen unless $DISPLAY or $QT_QPA_PLATFORM say otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BASELINE = """
import json, sys, time
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QWidget

app = QApplication(sys.argv[:1])
window = QWidget()
window.resize(1200, 800)

class FirstPaint(QObject):
    seen = False

    def eventFilter(self, obj, event):
        if obj is window and event.type() == QEvent.Type.Paint and not self.seen:
            self.seen = True
            QTimer.singleShot(0, report)
        return False

def report():
    print(json.dumps({"painted_at": time.monotonic()}), flush=True)
    app.exit(0)

watcher = FirstPaint()
window.installEventFilter(watcher)
window.show()
app.exec()
"""
TENSORFLOW = "import json, time, tensorflow; print(json.dumps({'painted_at': time.monotonic()}))"


def launch(command: list[str], env: dict[str, str]) -> tuple[float, dict]:
    """Seconds from starting ``command`` to the time it reports, and its report."""
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"bench_startup: {' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["painted_at"] - started, report


def run(repeats: int = 5, command: str | None = None) -> list[dict]:
    """The figures of :func:`measure` for benchmarks/run.py."""
    rows, _ = measure(repeats, command)
    ratio = [a / b for a, b in zip(rows["Replica Studio"], rows["bare Qt window (baseline)"])]
    cmd = "python benchmarks/bench_startup.py"
    return [{"name": "launch to first painted window (empty runs folder)", "value": statistics.median(
                 rows["Replica Studio"]), "target": 1.5, "better": "lower", "unit": "s",
             "spread": [min(rows["Replica Studio"]), max(rows["Replica Studio"])], "samples": rows["Replica Studio"],
             "command": cmd},
            {"name": "launch to first painted window / bare Qt window", "value": statistics.median(ratio),
             "target": None, "better": "lower", "unit": "x", "spread": [min(ratio), max(ratio)], "samples": ratio,
             "command": cmd}]


def measure(repeats: int, command: str | None):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    if not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
    app = [command] if command else [sys.executable, "-m", "gui_app"]
    rows: dict[str, list[float]] = {"bare Qt window (baseline)": [], "Replica Studio": [],
                                    "import tensorflow (reference)": []}
    tensorflow_in_gui = []
    for _ in range(repeats):  # interleaved, so load from elsewhere hits all rows alike
        rows["bare Qt window (baseline)"].append(launch([sys.executable, "-c", BASELINE], env)[0])
        with tempfile.TemporaryDirectory() as tmp:
            app_env = dict(env, REPLICA_STUDIO_CONFIG_DIR=f"{tmp}/config", REPLICA_STUDIO_RUNS_DIR=f"{tmp}/runs")
            seconds, report = launch([*app, "--measure-startup"], app_env)
        rows["Replica Studio"].append(seconds)
        tensorflow_in_gui.append(report["tensorflow_loaded"])
        rows["import tensorflow (reference)"].append(launch([sys.executable, "-c", TENSORFLOW], env)[0])
    return rows, tensorflow_in_gui


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--command", help="the app to measure (default: this Python's `-m gui_app`), e.g. a bundle")
    args = parser.parse_args()
    rows, tensorflow_in_gui = measure(args.repeats, args.command)
    env = dict(os.environ)
    if not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
    app = [args.command] if args.command else [sys.executable, "-m", "gui_app"]


    platform = env.get("QT_QPA_PLATFORM") or "desktop display"
    print(f"launch -> first painted window, median of {args.repeats} ({platform}; {' '.join(app)})")
    baseline = statistics.median(rows["bare Qt window (baseline)"])
    for name, times in rows.items():
        median = statistics.median(times)
        print(f"  {name:<30} {median:6.2f} s  (min {min(times):.2f}, max {max(times):.2f})  "
              f"{median / baseline:5.1f}x baseline")
    print(f"  TensorFlow imported in the GUI process by the first paint: {'yes' if any(tensorflow_in_gui) else 'no'}")


if __name__ == "__main__":
    main()
