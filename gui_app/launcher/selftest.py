"""``replica-studio --selftest``: can this installation do its job? Headless, offline.

Checks, in order: the shipped resources are there; Qt loads and draws the app's widgets
offscreen (and reaches the desktop's display when there is one); the engine process starts
TensorFlow and lists the devices; and it trains one epoch of the bundled digits with the
first-run setup (mirrored over every GPU, or over two CPU replicas), then evaluates.
The engine runs as the app runs it (``engine_command``), so in a PyInstaller bundle this
checks that the executable dispatches engine commands too. Exit 0 when every check passes;
otherwise 1 and a one-line reason on stderr.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, TypeVar

from gui_app import __version__
from gui_app.core.config import RunConfig
from gui_app.core.engine_output import error_line
from gui_app.core.events import Error, Eval, Event, RunFinished, RunStarted, Step, decode
from gui_app.core.rundir import MODEL_FILE
from gui_app.identity import APP_ID, ICON_SIZES, app_command, app_env, resource_path

EngineCommand = Callable[..., list[str]]
E = TypeVar("E", bound=Event)
MAX_REASON = 300


class CheckFailed(Exception):
    """A check failed; the message is the one-line reason."""


def _reason(stderr: str, returncode: int) -> str:
    """What the engine said on stderr about its failure (one rule for the app: error_line)."""
    return error_line(stderr.splitlines(), crashed=returncode < 0) or "no message"


def check_resources() -> str:
    try:
        files = [resource_path("datasets", "digits.csv.gz"), resource_path("icons", f"{APP_ID}.svg")]
        files += [resource_path("icons", "hicolor", f"{s}x{s}", "apps", f"{APP_ID}.png") for s in ICON_SIZES]
    except FileNotFoundError as exc:  # the resources folder itself
        raise CheckFailed(str(exc)) from None
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise CheckFailed(f"missing from this installation: {missing[0]}")
    return f"bundled digits dataset and {len(ICON_SIZES) + 1} icon files"


def check_qt(env: dict[str, str] | None = None) -> str:
    """Draw a chart offscreen with the app's icon; check the desktop platform if there is a display."""
    from gui_app.launcher import preflight

    env = dict(os.environ if env is None else env)
    problem = preflight.check_qt_libraries()
    if problem is not None:
        raise CheckFailed(problem.message())
    dirs = preflight.plugin_dirs(env)
    available = preflight.available_platforms(dirs)
    needed = {"win32": ["windows"], "darwin": ["cocoa"]}.get(sys.platform, ["xcb", "offscreen"])
    absent = [p for p in needed if p not in available]
    if absent:
        raise CheckFailed(f"Qt platform plugin {absent[0]!r} is missing (found: {', '.join(available) or 'none'})")

    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    from PySide6 import __version__ as pyside_version
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([APP_ID, "-platform", "offscreen"])
    import pyqtgraph

    import gui_app.ui.window.main_window  # noqa: F401 - every module the window imports
    from gui_app.ui.shell import app_icon

    if app_icon().pixmap(64).isNull():
        raise CheckFailed("the application icon does not load (PNG image support missing?)")
    plot = pyqtgraph.PlotWidget()
    plot.resize(400, 300)
    plot.plot([float(i) for i in range(200)], [math.exp(-i / 50) for i in range(200)])
    drawn = plot.grab()
    plot.deleteLater()
    app.processEvents()
    if drawn.isNull() or drawn.width() != 400:
        raise CheckFailed("a chart could not be drawn offscreen")
    detail = f"PySide6 {pyside_version}, a chart drawn offscreen"
    if env.get("DISPLAY") or env.get("WAYLAND_DISPLAY") or sys.platform in ("win32", "darwin"):
        candidates = preflight.platform_candidates([], env)
        problems = [p for name in candidates if (p := preflight.check_platform(name, dirs, env)) is not None]
        if len(problems) == len(candidates):  # none of them can start
            raise CheckFailed(f"the desktop cannot show the window: {problems[0].message()}")
        detail += "; the desktop's display accepts windows"
    else:
        detail += f"; no display here (platforms: {', '.join(available)})"
    return detail


def check_devices(engine: EngineCommand = app_command, timeout: float = 300) -> dict:
    try:
        done = subprocess.run(engine("devices", "--json"), capture_output=True, text=True, timeout=timeout,
                              env=app_env(), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise CheckFailed(f"the engine did not list the devices within {timeout:.0f} s") from None
    except OSError as exc:
        raise CheckFailed(f"cannot start the engine: {exc.strerror or exc}") from None
    if done.returncode != 0:
        raise CheckFailed(f"engine exited with code {done.returncode}: {_reason(done.stderr, done.returncode)}")
    try:
        info = json.loads(done.stdout)
    except ValueError:
        info = None
    if not isinstance(info, dict) or not {"tensorflow", "gpus"} <= info.keys():
        raise CheckFailed(f"the engine printed no device list: {done.stdout.strip()[:200]!r}")
    return info


def describe_devices(info: dict) -> str:
    gpus = info["gpus"]
    names = ", ".join(g.get("description") or g["name"] for g in gpus) if gpus else "no GPU"
    return f"TensorFlow {info['tensorflow']}, Keras {info.get('keras', '?')}; {names}"


def training_config(info: dict) -> RunConfig:
    """The first-run setup: mirrored over every GPU, or over two CPU replicas; one epoch."""
    gpus = bool(info["gpus"])
    return RunConfig.from_dict({
        "dataset": {"name": "digits"},
        "model": {"name": "mnist_cnn"},
        "strategy": {"name": "mirrored", "devices": [] if gpus else ["CPU:0", "CPU:1"]},
        "training": {"epochs": 1, "global_batch_size": 64, "steps_per_call": 5, "seed": 1},
        "runtime": {"cpu_devices": 1 if gpus else 2},
    })


def check_training(info: dict, workdir: Path, engine: EngineCommand = app_command, timeout: float = 600) -> str:
    config_path = workdir / "selftest-config.json"
    training_config(info).save(config_path)
    command = engine("train", str(config_path), "--runs-dir", str(workdir / "runs"), "--events", "jsonl")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=app_env(),
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise CheckFailed(f"training did not finish within {timeout:.0f} s") from None
    except OSError as exc:
        raise CheckFailed(f"cannot start the engine: {exc.strerror or exc}") from None
    try:
        events = [decode(json.loads(line)) for line in done.stdout.splitlines() if line.strip()]
    except ValueError:
        raise CheckFailed("the engine wrote something that is not an event on stdout") from None
    errors = _of(Error, events)
    if done.returncode != 0 or errors:
        reason = errors[-1].message if errors else _reason(done.stderr, done.returncode)
        raise CheckFailed(f"engine exited with code {done.returncode}: {reason}")
    return _verify_run(events)


def _of(kind: type[E], events: list[Event | None]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


def _verify_run(events: list[Event | None]) -> str:
    def one(kind: type[E]) -> E:
        found = _of(kind, events)
        if not found:
            raise CheckFailed(f"the engine sent no {kind.TYPE} event")
        return found[-1]

    started, finished, evaluation = one(RunStarted), one(RunFinished), one(Eval)
    steps, replicas = _of(Step, events), started.num_replicas
    if finished.status != "completed":
        raise CheckFailed(f"the run ended {finished.status}: {finished.message}")
    if len(steps) != started.total_steps - started.start_step:
        raise CheckFailed(f"expected {started.total_steps} step events, got {len(steps)}")
    for step in steps:
        if step.loss is None or not math.isfinite(step.loss) or len(step.replicas) != replicas:
            raise CheckFailed(f"step {step.step}: loss {step.loss} over {len(step.replicas)} replicas")
    if sum(map(sum, evaluation.confusion_matrix)) != evaluation.examples:
        raise CheckFailed("the confusion matrix does not add up to the test examples")
    chance = 1 / max(1, len(evaluation.class_names))
    if not (evaluation.accuracy or 0.0) > min(2 * chance, (1 + chance) / 2):  # 0.2 for the ten digits
        raise CheckFailed(f"test accuracy {evaluation.accuracy:.2f} after one epoch: no better than chance")
    if not (Path(finished.run_dir or "") / MODEL_FILE).is_file():
        raise CheckFailed(f"no trained model in {finished.run_dir}")
    speed = sum(s.examples_per_sec or 0.0 for s in steps[len(steps) // 2:]) / max(1, len(steps) - len(steps) // 2)
    return (f"{len(steps)} steps on {replicas} replicas ({started.strategy.get('name')}), {speed:,.0f} examples/s, "
            f"test accuracy {evaluation.accuracy:.2f}")


def run(engine: EngineCommand = app_command, timeout: float = 600, out=None) -> int:
    out = out or sys.stdout
    frozen = "bundle" if getattr(sys, "frozen", False) else "Python environment"
    print(f"Replica Studio {__version__} self-test: Python {platform.python_version()}, {platform.system()} "
          f"{platform.machine()}, {frozen} {sys.executable}", file=out, flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="replica-studio-selftest-"))
    info: dict = {}

    def devices() -> str:
        info.update(check_devices(engine, timeout))
        return describe_devices(info)

    checks = [("resources", check_resources), ("qt", check_qt), ("devices", devices),
              ("train", lambda: check_training(info, workdir, engine, timeout))]
    started, failure = time.monotonic(), None
    for name, check in checks:
        if name == "train" and not info:
            print(f"  skip  {name:<10} (needs the device list)", file=out, flush=True)
            continue
        began = time.monotonic()
        try:
            detail, ok = check(), True
        except CheckFailed as exc:
            detail, ok = str(exc), False
        except Exception as exc:  # noqa: BLE001 - a self-test reports, it does not crash
            detail, ok = f"{type(exc).__name__}: {exc}", False
        if len(detail) > MAX_REASON:  # TensorFlow's messages run to paragraphs
            detail = detail[:MAX_REASON - 3] + "..."
        failure = failure or (None if ok else f"{name}: {detail}")
        print(f"  {'ok  ' if ok else 'FAIL'}  {name:<10} {detail} ({time.monotonic() - began:.1f} s)",
              file=out, flush=True)
    total = time.monotonic() - started
    if failure:
        print(f"Self-test FAILED after {total:.0f} s; files kept in {workdir}", file=out, flush=True)
        print(f"replica-studio --selftest: {failure}", file=sys.stderr, flush=True)
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"Self-test passed in {total:.0f} s.", file=out, flush=True)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="replica-studio --selftest", description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600, metavar="SECONDS",
                        help="give up on an engine command after this long (default 600)")
    args = parser.parse_args(argv)
    return run(timeout=args.timeout)
