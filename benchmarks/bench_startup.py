"""Start-up: launch to first painted window (empty runs folder, and 1,000 runs with and without
their summary.json), launch to a window the user sees on an X screen, and launch to the first
finished step from the window and from the CLI.

    python benchmarks/bench_startup.py [--repeats 5] [--pairs 3] [--runs 1000] [--command EXE] [--json OUT]
                                       [--visible-only] [--display :46]

Every launch is a fresh process. The parent reads ``time.monotonic()`` just before starting
it; the child prints ``time.monotonic()`` once its main window has been painted (the app via
``replica-studio --measure-startup``; the baseline is a QApplication showing one empty
1200x800 QWidget, the least any Qt window costs). Both read the system's monotonic clock, so
the difference covers interpreter start-up, imports, building the window and its first paint.
``import tensorflow`` is timed for reference: the window must not wait for it (docs/architecture.md,
"Process model": TensorFlow loads in the engine process).

The runs folder: ``--runs`` synthetic runs of two replicas and 2,100 steps (1.7 MB of events
each, as a 20-epoch digits run at batch 32), written once into a temporary folder. *Warm*:
every run has its summary.json (the run list's cache). *Cold*: none has -- what a user
upgrading from a version without the cache, or copying runs in, sees first; the list then
reads every events.jsonl (about 15 s for 1,000 runs), on its own thread, after the paint.
The launches of one repeat are interleaved (baseline, empty, warm, cold, TensorFlow), so load
from elsewhere hits every row alike.

Visible window: what the user waits for. The first paint above is reported by the app itself,
offscreen; here an X server (Xvfb on ``--display``, 1280x720, no window manager, started by the
script) shows the window and ``xdotool search --onlyvisible`` is polled every 10 ms from the
launch until the window is mapped. Interleaved per repeat: a bare Qt window (the same baseline,
kept open), the app on an empty runs folder, the app on the warm 1,000 runs.

First finished step: ``replica-studio --config CFG --train --measure-startup`` (the window
trains as it opens and prints when the run's first ``step`` event reached it) against
``replica-studio train CFG --events jsonl`` (time of the first ``step`` line on its stdout),
the digits mnist_cnn mirrored over two logical CPUs; pairs alternate which goes first, the
ratio is per pair. Both processes are killed once the figure is read.

Exits non-zero when a target is missed (benchmarks/common.py). Offscreen unless $DISPLAY or
$QT_QPA_PLATFORM say otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

ROOT = common.ROOT
TARGET_PAINT_S = 1.5
TARGET_VISIBLE_EMPTY_S, TARGET_VISIBLE_RUNS_S = 1.0, 1.5  # launch to a window the user sees
RUN_STEPS = 2_100  # 1.7 MB of events.jsonl per run
FIRST_STEP_CONFIG = {"dataset": {"name": "digits"}, "model": {"name": "mnist_cnn"},
                     "strategy": {"name": "mirrored", "devices": ["CPU:0", "CPU:1"]},
                     "training": {"epochs": 20, "global_batch_size": 32}, "runtime": {"cpu_devices": 2}}

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


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    if not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
    return env


def launch(command: list[str], env: dict[str, str]) -> tuple[float, dict]:
    """Seconds from starting ``command`` to the time it reports, and its report."""
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL,
                          cwd=str(ROOT), check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_startup: {' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["painted_at"] - started, report


def until_line(command: list[str], env: dict[str, str], wanted, timeout: float = 300) -> float:
    """Seconds from starting ``command`` to the first stdout line (JSON) for which ``wanted``
    is true; then the process and everything it started are killed."""
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            text=True, env=env, cwd=str(ROOT), start_new_session=True)
    try:
        for line in proc.stdout:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("error"):
                raise SystemExit(f"bench_startup: {' '.join(command)}: {record['error']}")
            if isinstance(record, dict) and wanted(record):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                break
        raise SystemExit(f"bench_startup: {' '.join(command)} ended without the line it was timed for")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the window and the engine it started
        except ProcessLookupError:
            pass
        proc.wait()


BASELINE_VISIBLE = """
import sys
from PySide6.QtWidgets import QApplication, QWidget

app = QApplication(sys.argv[:1])
window = QWidget()
window.setWindowTitle("Replica baseline")
window.resize(1200, 700)
window.show()
app.exec()
"""


def start_xvfb(display: str) -> subprocess.Popen:
    # -noreset: an X server resets when its last client leaves and refuses connections meanwhile
    # (the launcher's display check connects and leaves just before Qt connects).
    server = subprocess.Popen(["Xvfb", display, "-screen", "0", "1280x720x24", "-nolisten", "tcp", "-noreset"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while subprocess.run(["xdotool", "getdisplaygeometry"], env=dict(os.environ, DISPLAY=display),
                         capture_output=True, check=False).returncode != 0:  # a socket file may be a stale one
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"bench_startup: Xvfb {display} did not start")
        time.sleep(0.05)
    return server


def until_visible(command: list[str], env: dict[str, str], title: str, timeout: float = 60) -> float:
    """Seconds from starting ``command`` to a visible (mapped) window whose title starts with
    ``title`` on ``env``'s display; then the process is killed."""
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            env=env, cwd=str(ROOT), start_new_session=True)
    try:
        while time.monotonic() - started < timeout:
            found = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", f"^{title}"],
                                   capture_output=True, text=True, env=env, check=False)
            if found.stdout.strip():
                return time.monotonic() - started
            if proc.poll() is not None:
                raise SystemExit(f"bench_startup: {' '.join(command)} ended ({proc.returncode}) before it showed")
            time.sleep(0.01)
        raise SystemExit(f"bench_startup: no visible window from {' '.join(command)} in {timeout:g} s")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def measure_visible(repeats: int, command: str | None, runs_folder: Path, display: str) -> dict[str, list[float]]:
    env = dict(_env(), DISPLAY=display, QT_QPA_PLATFORM="xcb")
    app = [command] if command else [sys.executable, "-m", "gui_app"]
    rows: dict[str, list[float]] = {"bare Qt window (baseline)": [], "empty runs folder": [], "1,000 runs, warm": []}
    server = start_xvfb(display)
    try:
        for _ in range(repeats):
            rows["bare Qt window (baseline)"].append(
                until_visible([sys.executable, "-c", BASELINE_VISIBLE], env, "Replica baseline"))
            for name, folder in (("empty runs folder", None), ("1,000 runs, warm", runs_folder)):
                with tempfile.TemporaryDirectory() as tmp:
                    app_env = dict(env, HOME=tmp, REPLICA_STUDIO_CONFIG_DIR=f"{tmp}/config",
                                   REPLICA_STUDIO_RUNS_DIR=str(folder or f"{tmp}/runs"))
                    rows[name].append(until_visible(app, app_env, "Replica Studio"))
    finally:
        server.terminate()
        server.wait(10)
    return rows


def make_runs(folder: Path, count: int) -> Path:
    """``count`` run folders with the same 1.7 MB events.jsonl and their summary.json (warm)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests" / "ui"))
    from synthetic import jsonl, synthetic_events  # tests/ui/synthetic.py

    from gui_app.core import rundir
    from gui_app.core.config import RunConfig

    events = jsonl(synthetic_events(steps=RUN_STEPS, epochs=20, replicas=2))
    config = RunConfig().to_json()
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        run = folder / f"20261101-{i // 3600:02d}{i // 60 % 60:02d}{i % 60:02d}-digits-mnist_cnn"
        run.mkdir()
        (run / rundir.CONFIG_FILE).write_text(config, encoding="utf-8")
        (run / rundir.EVENTS_FILE).write_text(events, encoding="utf-8")
    rundir.list_runs(folder)  # writes every summary.json
    return folder


class ColdFolder:
    """The runs folder without its summaries, for one launch: moved aside and put back after,
    so the next warm launch is warm again (what a cold launch wrote is dropped)."""

    def __init__(self, folder: Path) -> None:
        self.summaries = [p / "summary.json" for p in folder.iterdir()]

    def __enter__(self) -> None:
        for s in self.summaries:
            s.rename(s.with_name(".summary.kept"))

    def __exit__(self, *exc) -> None:
        for s in self.summaries:
            s.unlink(missing_ok=True)
            s.with_name(".summary.kept").rename(s)


def measure_paint(repeats: int, command: str | None, runs_folder: Path) -> dict[str, list]:
    env = _env()
    app = [command] if command else [sys.executable, "-m", "gui_app"]
    rows: dict[str, list] = {"bare Qt window (baseline)": [], "empty runs folder": [], "1,000 runs, warm": [],
                             "1,000 runs, cold": [], "import tensorflow (reference)": [], "tensorflow_loaded": []}
    for _ in range(repeats):
        rows["bare Qt window (baseline)"].append(launch([sys.executable, "-c", BASELINE], env)[0])
        for name, folder in (("empty runs folder", None), ("1,000 runs, warm", runs_folder),
                             ("1,000 runs, cold", runs_folder)):
            with tempfile.TemporaryDirectory() as tmp:
                app_env = dict(env, REPLICA_STUDIO_CONFIG_DIR=f"{tmp}/config",
                               REPLICA_STUDIO_RUNS_DIR=str(folder or f"{tmp}/runs"))
                if name.endswith("cold"):
                    with ColdFolder(runs_folder):
                        seconds, report = launch([*app, "--measure-startup"], app_env)
                else:
                    seconds, report = launch([*app, "--measure-startup"], app_env)
            rows[name].append(seconds)
            rows["tensorflow_loaded"].append(bool(report["tensorflow_loaded"]))
        rows["import tensorflow (reference)"].append(launch([sys.executable, "-c", TENSORFLOW], env)[0])
    return rows


def measure_first_step(pairs: int, command: str | None) -> dict[str, list[float]]:
    sys.path.insert(0, str(ROOT))
    from gui_app.core.events import Step, decode

    env = _env()
    app = [command] if command else [sys.executable, "-m", "gui_app"]
    rows: dict[str, list[float]] = {"window": [], "cli": []}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "digits.json"
        config.write_text(json.dumps(FIRST_STEP_CONFIG), encoding="utf-8")
        for i in range(pairs):
            def window(i: int = i) -> float:  # fresh settings for every launch: the first-run setup
                app_env = dict(env, REPLICA_STUDIO_CONFIG_DIR=f"{tmp}/config-{i}",
                               REPLICA_STUDIO_RUNS_DIR=f"{tmp}/runs")
                return until_line([*app, "--config", str(config), "--train", "--measure-startup"], app_env,
                                  lambda r: "first_step_at" in r)

            def cli() -> float:
                return until_line([*app, "train", str(config), "--events", "jsonl", "--runs-dir", f"{tmp}/runs"],
                                  env, lambda r: isinstance(decode(r), Step))

            order = (("window", window), ("cli", cli)) if i % 2 == 0 else (("cli", cli), ("window", window))
            for name, run in order:
                rows[name].append(run())
    return rows


def visible_figures(visible: dict[str, list[float]], runs: int, cmd: str) -> list[dict]:
    figures = [common.figure(f"launch to visible window on Xvfb, {name}".replace("1,000", f"{runs:,}"),
                             visible[name], target, "lower", "s", cmd)
               for name, target in (("bare Qt window (baseline)", None), ("empty runs folder", TARGET_VISIBLE_EMPTY_S),
                                    ("1,000 runs, warm", TARGET_VISIBLE_RUNS_S))]
    ratios = [a / b for a, b in zip(visible["empty runs folder"], visible["bare Qt window (baseline)"])]
    figures.append(common.figure("visible window / bare Qt window (empty folder)", ratios, None, "lower", "x", cmd))
    return figures


def run(repeats: int = 5, command: str | None = None, runs: int = 1000, pairs: int | None = None,
        display: str | None = None, visible_only: bool = False) -> list[dict]:
    """The figures for benchmarks/run.py (and this script's main). ``display``: the X display to
    start Xvfb on for the visible-window figures (none without Xvfb and xdotool)."""
    pairs = pairs if pairs is not None else max(2, repeats - 2)
    cmd = "python benchmarks/bench_startup.py"
    can_show = display and shutil.which("Xvfb") and shutil.which("xdotool")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        folder = make_runs(Path(tmp) / "runs", runs)
        visible = measure_visible(repeats, command, folder, display) if can_show else None
        if visible_only:
            return visible_figures(visible, runs, cmd) if visible else []
        paint = measure_paint(repeats, command, folder)
    first = measure_first_step(pairs, command)
    figures = [common.figure(f"launch to first painted window, {name}", paint[name], TARGET_PAINT_S, "lower", "s",
                             cmd) for name in ("empty runs folder", "1,000 runs, warm", "1,000 runs, cold")]
    if runs != 1000:
        for f in figures:
            f["name"] = f["name"].replace("1,000", f"{runs:,}")
    figures.append(common.figure("launch to first painted window / bare Qt window (empty folder)",
                                 [a / b for a, b in zip(paint["empty runs folder"],
                                                         paint["bare Qt window (baseline)"])],
                                 None, "lower", "x", cmd))
    figures.append(common.figure("TensorFlow imported in the window by its first paint (launches)",
                                 [float(sum(paint["tensorflow_loaded"]))], 0, "lower", "n", cmd))
    figures.append(common.figure("import tensorflow (reference)", paint["import tensorflow (reference)"], None,
                                 "lower", "s", cmd))
    if visible:
        figures += visible_figures(visible, runs, cmd)
    figures.append(common.figure("launch to first finished step, window (--train)", first["window"], None, "lower",
                                 "s", cmd))
    figures.append(common.figure("launch to first finished step, CLI (train)", first["cli"], None, "lower", "s", cmd))
    figures.append(common.figure("first finished step, window / CLI (per pair)",
                                 [w / c for w, c in zip(first["window"], first["cli"])], None, "lower", "x", cmd))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="launches of each first-paint kind")
    parser.add_argument("--pairs", type=int, help="window/CLI first-step pairs (default: repeats - 2, at least 2)")
    parser.add_argument("--runs", type=int, default=1000, help="runs in the folder of the warm and cold launches")
    parser.add_argument("--command", help="the app to measure (default: this Python's `-m gui_app`), e.g. a bundle")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--display", default=":46", help="X display for Xvfb, for the visible-window figures")
    parser.add_argument("--visible-only", action="store_true", help="only the visible-window figures")
    args = parser.parse_args()
    figures = run(args.repeats, args.command, args.runs, args.pairs, args.display, args.visible_only)
    platform = _env().get("QT_QPA_PLATFORM") or "desktop display"
    print(f"start-up ({platform}; medians [min-max, n])")
    common.show(figures)
    return common.finish(figures, args.json)


if __name__ == "__main__":
    sys.exit(main())
