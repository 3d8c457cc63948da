"""The window training on an SSH host (Debian's sshd in a network namespace, tests/ssh_host.py)
against training on this computer, in one run, interleaved (here, there, there with an outage):

- engine emit -> chart point: for every step, the time from the engine's write (the event's
  ``time``, one clock: the namespace shares this kernel) to the Training tab's redraw that draws
  it; p99 per run (target <= 100 ms, here and over ssh);
- re-attach after the link comes back: this machine's end of the host's veth pair is set down
  mid-run for each of ``--outages`` seconds, then up; the time from "up" to the next step on the
  window's charts (target <= 5 s). A short outage is outlived by the TCP connection; one longer
  than ssh's ServerAliveInterval x 3 (45 s) ends it (exit 255), and the window attaches again;
- the same after the attach's ssh client is killed (the reconnect path, without an outage);
- and that every run completed with every step once on the charts.

The forms' deferred dataset check is withdrawn: its TensorFlow process would share the cores
with the run being measured.

Needs root (a namespace, a user, sshd), like the tests. Offscreen Qt, in this process.

    PYTHONPATH=. python benchmarks/bench_remote_window.py [--repeats 2] [--outages 20,75]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

import common
from ssh_host import ALIAS, VETH, running_host, ssh_clients

from gui_app.core.config import RunConfig, StrategyConfig, TrainingConfig
from gui_app.core.events import Step
from gui_app.core.ssh_hosts import Host, add_host
from gui_app.ui import gc_guard
from gui_app.ui.settings import Settings
from gui_app.ui.tabs.training import TrainingTab
from gui_app.ui.window.main_window import MainWindow
from gui_app.ui.window.window_state import TRAINING

CMD = "python benchmarks/bench_remote_window.py"
_pending: list[float] = []  # emit times of the steps folded into the history, not drawn yet
_latencies: list[float] = []
_redraw = TrainingTab._redraw


def _measured_redraw(tab: TrainingTab) -> None:
    _redraw(tab)
    now = time.time()
    _latencies.extend(now - emitted for emitted in _pending)
    _pending.clear()


TrainingTab._redraw = _measured_redraw  # the one redraw that puts a step on the Training tab's charts


def _wait(condition, timeout_s: float) -> bool:
    """Run the event loop until ``condition()`` (polled every 10 ms) or the timeout."""
    loop, poll = QEventLoop(), QTimer(interval=10)
    poll.timeout.connect(lambda: loop.quit() if condition() else None)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    poll.start()
    loop.exec()
    poll.stop()
    return condition()


def _back(notices: list[tuple[float, str]], arrivals: list[float], since: float) -> float | None:
    """When the window had the run again after ``since``: the lost connection's notice cleared,
    or, with no connection lost, its first step after ``since``."""
    if any(text for _, text in notices):
        return next((t for t, text in notices if not text and t > since), None)
    return next((t for t in arrivals if t > since), None)


def _p99(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _link(state: str) -> None:
    subprocess.run(["ip", "link", "set", VETH, state], check=True, timeout=30)


def one_run(config: RunConfig, run_on: str | None, outage_s: float | None) -> dict:
    """One run trained from a window; ``outage_s``: the link down that long mid-run (0: the
    attach's ssh client killed instead; None: nothing happens to it)."""
    window = MainWindow(settings=Settings(run_on=run_on, confirm_close_during_run=False))
    window.show()
    window.config_panel.set_config(config, checked=True)
    window.config_panel.inspector.withdraw()
    steps: list[int] = []
    arrivals: list[float] = []
    transit: list[float] = []  # emit -> the batch on the GUI thread (the rest is the fold and the redraw throttle)

    def on_events(batch: list) -> None:
        for event in batch:
            if isinstance(event, Step):
                steps.append(event.step)
                arrivals.append(time.time())
                transit.append(arrivals[-1] - event.time)
                _pending.append(event.time)

    window.supervisor.events.connect(on_events)
    notices: list[tuple[float, str]] = []  # "connection to HOST lost, reconnecting…", then "" once attached again
    window.supervisor.notice.connect(lambda text: notices.append((time.time(), text)))
    ended: list[str] = []
    window.supervisor.finished.connect(lambda status, *_: ended.append(status))
    _latencies.clear()
    _pending.clear()
    result: dict = {"where": run_on or "here"}
    try:
        window.run.train()
        window.state.set_tab(TRAINING)
        if not _wait(lambda: len(steps) >= 10 or ended, 600):
            raise RuntimeError("no steps within 10 minutes")
        if outage_s is not None:
            if outage_s:
                _link("down")
                try:
                    _wait(lambda: False, outage_s)
                finally:
                    _link("up")
                up = time.time()
            else:
                _wait(lambda: bool(ssh_clients(" attach ")), 30)
                up = time.time()
                for pid in ssh_clients(" attach "):
                    os.kill(pid, signal.SIGKILL)
            # Attached again: the notice cleared by the new attach's first event; a connection that
            # outlived the outage: the first step after it.
            _wait(lambda: _back(notices, arrivals, up) is not None or ended, 600)
            back = _back(notices, arrivals, up)
            result.update(reattach_s=back - up if back is not None else None,
                          connection_lost=any(text for _, text in notices))
        _wait(lambda: bool(ended), 900)
        result.update(status=ended[0] if ended else "timeout", steps=len(steps),
                      once=steps == list(range(1, len(steps) + 1)))
        if outage_s is None:
            ordered, came = sorted(_latencies) or [float("nan")], sorted(transit) or [float("nan")]
            result.update(p99_ms=1000 * _p99(ordered), median_ms=1000 * statistics.median(ordered),
                          points=len(ordered), transit_p99_ms=1000 * _p99(came),
                          transit_median_ms=1000 * statistics.median(came))
    finally:
        window.close()
        window.deleteLater()
        _wait(lambda: False, 0.5)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--outages", default="20,75", help="seconds the link stays down, one run each")
    parser.add_argument("--cases", default="here,ssh,killed,link", help="which of here, ssh, killed, link to run")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    gc_guard.install(app)
    config = RunConfig(strategy=StrategyConfig(name="one_device"),
                       training=TrainingConfig(epochs=args.epochs, global_batch_size=64, steps_per_call=1, seed=1))
    outages = [float(s) for s in args.outages.split(",") if s]
    cases = [("here", None, None), ("ssh", ALIAS, None), ("killed", ALIAS, 0.0),
             *((f"link down {s:g} s", ALIAS, s) for s in outages)]
    cases = [case for case in cases if case[0].split()[0] in args.cases.split(",")]
    rows: dict[str, list] = {name: [] for name, _, _ in cases}
    with running_host() as host, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ.update({key: value for key, value in host.env(folder / "config").items()
                           if key in ("REPLICA_STUDIO_SSH_CONFIG", "XDG_RUNTIME_DIR", "REPLICA_STUDIO_CONFIG_DIR")})
        os.environ["REPLICA_STUDIO_RUNS_DIR"] = str(folder / "runs")
        add_host(Host(ALIAS, command=host.command, runs_dir="~/bench-remote-window"))
        for _ in range(args.repeats):
            for name, run_on, outage in cases:
                result = one_run(config, run_on, outage)
                print(json.dumps({"case": name, **result}), flush=True)
                rows[name].append(result)
    figures = [
        *(common.figure(f"emit -> chart point p99, {name}", [r["p99_ms"] for r in rows[name]], 100, "lower", "ms",
                        CMD) for name, _, outage in cases if outage is None),
        *(common.figure(f"next step on the charts after: {name}" if name == "killed" else
                        f"re-attach after the link comes back ({name})",
                        [r["reattach_s"] for r in rows[name] if r.get("reattach_s") is not None] or [float("inf")],
                        5.0, "lower", "s", CMD) for name, _, outage in cases if outage is not None),
    ]
    for f in figures:
        print(f"{f['name']}: {f['value']:.3g} {f['unit']} [{f['spread'][0]:.3g}-{f['spread'][1]:.3g}] "
              f"(target {f['target']}) {'ok' if common.passed(f) else 'MISSED'}")
    every_once = all(r["once"] and r["status"] == "completed" for rs in rows.values() for r in rs)
    print(f"every run completed with every step once: {every_once}")
    if args.json:
        Path(args.json).write_text(json.dumps({"figures": figures, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
