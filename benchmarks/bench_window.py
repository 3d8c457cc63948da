"""The window's cost and responsiveness while it trains, and the memory of both processes.

    python benchmarks/bench_window.py [--quick] [--pairs 2] [--epochs 20] [--json OUT]

One pair = the same run twice, interleaved: ``replica-studio train CONFIG --events none``
from the command line, then the real ``MainWindow`` (offscreen, 1400x900, Replicas tab
visible, charts live) training the same config through its supervisor and the real engine.
The config is the bundled digits set, mnist_cnn, MirroredStrategy over two logical CPUs,
batch 64, ``--epochs`` epochs (20; ``--quick`` 5).

Figures (medians over pairs):
- window/CLI examples/s: the median of the run's step events' ``examples_per_sec`` from
  the window over the same from the CLI (target >= 0.95);
- event-loop latency while the engine runs (run_started to finished): a 10 ms QTimer's lateness,
  max (<= 100 ms) and p99 (<= 33 ms);
- peak RSS of the window process and of the engine (``getrusage``; the CLI's engine too);
- how much the window's RSS grows per step while it trains (from a fifth of the run to its
  last step event; the chart buffers hold about 200 bytes a step), and from run_started to
  finished (which adds the evaluation view and its images).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common


def digits_config(epochs: int) -> dict:
    return {"dataset": {"name": "digits"}, "model": {"name": "mnist_cnn"},
            "strategy": {"name": "mirrored", "devices": ["CPU:0", "CPU:1"]},
            "training": {"epochs": epochs, "global_batch_size": 64, "seed": 1},
            "runtime": {"cpu_devices": 2}}


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss(pid: int | None) -> int:
    """A process's peak RSS so far (VmHWM), 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration, TypeError):
        return 0


def _run_rate(run_dir: Path) -> tuple[float, int]:
    from gui_app.core.events import Step
    from gui_app.core.rundir import read_raw_events

    rates = [e.examples_per_sec for e in read_raw_events(run_dir) if isinstance(e, Step) and e.examples_per_sec]
    return statistics.median(rates), len(rates)


def _growth(samples: list[tuple[int, int]]) -> float:
    if len(samples) < 3:
        return float("nan")
    first = next(s for s in samples if s[0] >= samples[-1][0] / 5)
    last = samples[-1]
    return (last[1] - first[1]) / max(last[0] - first[0], 1)


def window_child(config_path: str, runs_dir: str) -> None:
    """Run in its own process: the window trains once; prints one JSON line."""
    sys.path.insert(0, str(common.ROOT))
    from PySide6.QtCore import QElapsedTimer, QTimer
    from PySide6.QtWidgets import QApplication

    from gui_app.core.config import RunConfig
    from gui_app.core.events import Step
    from gui_app.core.live_runs import live_process
    from gui_app.ui.settings import Settings
    from gui_app.ui.window.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    window = MainWindow(settings=Settings(), runs_dir=runs_dir)
    window.resize(1400, 900)
    window.show()
    config = RunConfig.load(config_path)
    clock = QElapsedTimer()
    clock.start()
    lateness: list[float] = []
    state = {"last": None, "measuring": False, "rss0": None, "rss_end": None, "finished": None}
    probe = QTimer()
    probe.setInterval(10)

    def tick():
        now = clock.nsecsElapsed() / 1e6
        if state["measuring"] and state["last"] is not None:
            lateness.append(max(0.0, now - state["last"] - 10.0))
        state["last"] = now

    def started(_event):
        window.tabs.setCurrentWidget(window.replicas_tab)
        state["measuring"], state["rss0"] = True, _rss()

    def finished(status, run_dir, message):
        state["measuring"] = False
        state["rss_end"] = _rss()
        state["finished"] = (status, run_dir, message)
        QTimer.singleShot(200, app.quit)

    samples: list[tuple[int, int]] = []  # (last step seen, RSS) per event batch while training
    engine = {"pid": None, "peak": 0}  # the run is detached: not a child, so getrusage does not see it

    def on_events(events):
        steps = [e.step for e in events if isinstance(e, Step)]
        if steps and state["measuring"]:
            samples.append((max(steps), _rss()))
        engine["pid"] = engine["pid"] or getattr(live_process(window.state.active_run or ""), "pid", None)
        engine["peak"] = max(engine["peak"], _peak_rss(engine["pid"]))

    window.supervisor.events.connect(on_events)
    probe.timeout.connect(tick)
    probe.start()
    window.supervisor.run_started.connect(started)
    window.supervisor.finished.connect(finished)
    QTimer.singleShot(0, lambda: (window.supervisor.start_train(config, runs_dir),
                                  window.tabs.setCurrentWidget(window.replicas_tab)))
    app.exec()
    status, run_dir, message = state["finished"]
    if status != "completed":
        raise SystemExit(f"the window's run {status}: {message}")
    rate, steps = _run_rate(Path(run_dir))
    lateness.sort()
    p99 = lateness[min(len(lateness) - 1, int(0.99 * len(lateness)))] if lateness else 0.0
    print(json.dumps({
        "rate": rate, "steps": steps, "latency_max_ms": max(lateness, default=0.0), "latency_p99_ms": p99,
        "window_peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "engine_peak_rss": engine["peak"],
        # From the first fifth of the run to its last step event: the end (evaluation view,
        # misclassified images) and the first buffers' allocation are not per-step growth.
        "rss_growth_per_step": _growth(samples),
        "rss_growth_to_end_per_step": (state["rss_end"] - state["rss0"]) / max(steps, 1),
    }), flush=True)


def run(quick: bool = False, pairs: int | None = None, epochs: int | None = None) -> list[dict]:
    pairs = pairs or (1 if quick else 2)
    epochs = epochs or (5 if quick else 20)
    rows = {k: [] for k in ("ratio", "max", "p99", "window_rss", "engine_rss", "cli_rss", "growth", "growth_end")}
    with tempfile.TemporaryDirectory(prefix="bench-window-") as tmp:
        config = Path(tmp) / "digits.json"
        config.write_text(json.dumps(digits_config(epochs)), encoding="utf-8")
        environment = common.env(REPLICA_STUDIO_CONFIG_DIR=f"{tmp}/config")
        for i in range(pairs):
            cli_runs = Path(tmp) / f"cli-{i}"
            _, out = common.timed([common.PYTHON, "-c", _CLI_CHILD, str(config), str(cli_runs)], environment)
            cli = json.loads(out.strip().splitlines()[-1])
            cli_rate, _ = _run_rate(next(cli_runs.iterdir()))
            _, out = common.timed([common.PYTHON, __file__, "--child", str(config), str(Path(tmp) / f"win-{i}")],
                                  environment)
            win = json.loads(out.strip().splitlines()[-1])
            rows["ratio"].append(win["rate"] / cli_rate)
            rows["max"].append(win["latency_max_ms"])
            rows["p99"].append(win["latency_p99_ms"])
            rows["window_rss"].append(win["window_peak_rss"] / 2**20)
            rows["engine_rss"].append(win["engine_peak_rss"] / 2**20)
            rows["cli_rss"].append(cli["peak_rss"] / 2**20)
            rows["growth"].append(win["rss_growth_per_step"])
            rows["growth_end"].append(win["rss_growth_to_end_per_step"])
            print(f"    window pair {i + 1}: CLI {cli_rate:.0f} ex/s, window {win['rate']:.0f} ex/s; latency max "
                  f"{win['latency_max_ms']:.0f} ms p99 {win['latency_p99_ms']:.0f} ms; RSS window "
                  f"{rows['window_rss'][-1]:.0f} MiB engine {rows['engine_rss'][-1]:.0f} MiB",
                  file=sys.stderr, flush=True)
    cmd = f"python benchmarks/bench_window.py{' --quick' if quick else ''}"
    name = f"digits {epochs} epochs, mirrored 2 CPUs"
    return [
        common.figure(f"window/CLI examples/s, {name}", rows["ratio"], 0.95, command=cmd),
        common.figure("event-loop latency max while training (10 ms timer)", rows["max"], 100, "lower", "ms", cmd),
        common.figure("event-loop latency p99 while training (10 ms timer)", rows["p99"], 33, "lower", "ms", cmd),
        common.figure(f"peak RSS, window process, {name}", rows["window_rss"], None, "lower", "MiB", cmd),
        common.figure(f"peak RSS, engine started by the window, {name}", rows["engine_rss"], None, "lower", "MiB", cmd),
        common.figure(f"peak RSS, engine from the CLI, {name}", rows["cli_rss"], None, "lower", "MiB", cmd),
        common.figure("window RSS growth per step while training", rows["growth"], None, "lower", "B", cmd),
        common.figure("window RSS growth per step, run_started to finished (incl. evaluation view)",
                      rows["growth_end"], None, "lower", "B", cmd),
    ]


# The CLI side: the engine in a child of this small process, so getrusage gives its peak RSS.
_CLI_CHILD = """
import json, resource, subprocess, sys
subprocess.run([sys.executable, "-m", "gui_app.engine", "train", sys.argv[1], "--events", "none",
                "--runs-dir", sys.argv[2]], check=True, stdin=subprocess.DEVNULL)
print(json.dumps({"peak_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pairs", type=int)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.child:
        window_child(*args.child)
        return 0
    figures = run(args.quick, args.pairs, args.epochs)
    common.show(figures)
    return common.finish(figures, args.json)


if __name__ == "__main__":
    sys.exit(main())
