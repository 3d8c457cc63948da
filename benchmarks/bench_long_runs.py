"""Long and wide runs (issue 30): what a run of N steps x R replicas costs the window, the run
list, ``compare``, a re-attachment, and what keeping its history costs the engine.

    python benchmarks/bench_long_runs.py [--steps 300000] [--replicas 8] [--epochs 100] [--forms old,new] [--repeats 3]
        [--only lines,window,runs,compare,attach,ssh,engine,records] [--no-pyramid] [--source RUN] [--work DIR] [--keep]
        [--reuse]
        [--engine-variant NAME:VAR=VALUE ...] [--pairs 3] [--json OUT]

The runs are synthetic (benchmarks/long_runs.py): a real short run's events repeated to N steps
x R replicas, in protocol 2's long step lines (``old``, what every run before protocol 3 holds)
and protocol 3's lean ones (``new``). Each form gets a runs folder of its own holding that one
run, with its history at several resolutions (``history/``) built once after it is written, as
the engine keeps it while a run goes (timed: what the first reader of an old run pays);
``--no-pyramid`` leaves it out (every reader but the first then reads a pyramid the first built).
Sections, every figure a fresh process, repeats interleaved across the forms:

- ``lines``: bytes per step line, the time to decode one (``LineDecoder.line``, as the window
  and ``read_events`` do for every line) and to encode one (``LineEncoder`` and ``json.dumps``, as
  the engine's writer does every step), at 2 and 8 replicas, from 2,000-step runs.
- ``window``: the real ``MainWindow`` (offscreen), launched with the runs folder: seconds from
  the process start to the window idle with the run list filled (its first look, no
  ``summary.json``) and the process's RSS then; then the run list's row double-clicked
  (``itemDoubleClicked``, the real open path): seconds to idle again, and the window's peak RSS.
  Idle: five 20 ms timers in a row each fired within 10 ms of when due; the time is when the
  first of them was started. Device detection is not started (another process, on the same cores).
  The open is done when the run is shown (its Background read over, the training charts holding
  its steps): the idle streak counts only ticks where that holds.
- ``runs``: ``replica-studio runs --runs-dir DIR`` with no ``summary.json`` (cold): wall seconds
  and peak RSS (``ru_maxrss`` of that process alone: ``common.peak_run`` forks it from a small
  wrapper; a child of this process would report at least this process's RSS).
- ``compare``: ``replica-studio compare RUN RUN``: wall seconds and peak RSS.
- ``attach``: ``replica-studio attach RUN --control none`` of the finished run (every line: a
  script's attach) and ``attach RUN --history --control none`` (the window's re-attachment: the
  history from the pyramid, then the events after it): seconds and the bytes each writes.
- ``ssh``: the same two over the SSH test host (tests/ssh_host.py's ``running_host``: sshd in a
  network namespace, as root; the run moved into the host user's home and given to that user):
  ``attach --host ALIAS RUN --history`` (and ``--replays`` times every line), wall seconds here
  and the bytes that reached this side.
- ``engine``: the cost of keeping the history: ``replica-studio train`` of digits (mnist_cnn,
  mirrored over two logical CPUs) under each engine variant, interleaved pairs; the figure is
  the median of the run's step events' examples/s. Variants: ``lean`` (as the engine runs: the
  pyramid kept) and ``no history`` (``REPLICA_STUDIO_HISTORY=0``: summary.json only);
  ``--engine-variant NAME:VAR=VALUE`` adds one (``full:REPLICA_STUDIO_EVENT_LINES=full``: protocol
  2's long lines).
- ``records``: the engine's own per-step work for a run this wide, in this process: its line
  (``LineEncoder.encode`` and ``json.dumps``, as ``EventWriter.emit``) and its records
  (``RunRecords.add``: the pyramid and the summary, as the engine feeds them each event), with
  the history kept and without it (``REPLICA_STUDIO_HISTORY=0``), in microseconds per step, from
  the run's first ``RECORD_STEPS`` steps fed to a fresh run folder; set against a step's time
  this is the engine's overhead (``engine`` measures it end to end, at two replicas).

Disk: 300,000 x 8 is 778 MB old and about 410 MB new (its history/ a few MB); the runs are
deleted at the end unless ``--keep``. ``--reuse`` reads the runs an earlier ``--keep`` (or
``long_runs.py`` into ``WORK/FORM``) left in ``--work`` rather than writing them again: a
1,000,000 x 32 run is written once and its sections measured one invocation at a time.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import long_runs

from gui_app.core import rundir
from gui_app.core.event_lines import LineDecoder, LineEncoder
from gui_app.core.history.pyramid_files import update_pyramid
from gui_app.engine.run.records import HISTORY_ENV
from gui_app.identity import app_command

SECTIONS = ("lines", "window", "runs", "compare", "attach", "ssh", "engine", "records")
ENGINE_CONFIG = {**long_runs.SOURCE_CONFIG, "training": {"epochs": 2, "global_batch_size": 64, "seed": 1}}
MB = 1024 * 1024


# ---- measured in a child: the window ----------------------------------------------------------
def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))


def _until_idle(condition=lambda: True, interval: float = 0.02, late: float = 0.01, ticks: int = 5,
                timeout: float = 1800) -> float:
    """The monotonic time the event loop became idle (see the module's docstring) with ``condition``
    holding: a tick where it does not hold starts the streak again, so work that a thread finishes
    while the loop idles (the Open of a big run reads it on a Background thread) is waited for."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop, state = QEventLoop(), {"streak": 0, "since": 0.0, "due": 0.0, "end": time.monotonic() + timeout}

    def tick() -> None:
        now = time.monotonic()
        if now - state["due"] <= late and condition():
            if state["streak"] == 0:
                state["since"] = state["due"] - interval
            state["streak"] += 1
        else:
            state["streak"] = 0
        if state["streak"] >= ticks or now > state["end"]:
            loop.quit()
            return
        state["due"] = time.monotonic() + interval
        QTimer.singleShot(int(interval * 1000), tick)

    state["due"] = time.monotonic() + interval
    QTimer.singleShot(int(interval * 1000), tick)
    loop.exec()
    if time.monotonic() > state["end"]:
        raise SystemExit("bench_long_runs: the window never became idle")
    return state["since"]


def window_child(runs_dir: str, run_name: str, started: float) -> None:
    """Launch the window on ``runs_dir``, wait until idle, double-click ``run_name``; print figures."""
    from PySide6.QtWidgets import QApplication

    from gui_app.ui.application import polish_application
    from gui_app.ui.window.main_window import MainWindow
    from gui_app.ui.window.runs_panel import PATH_ROLE

    app = QApplication([sys.argv[0]])
    polish_application(app)
    window = MainWindow(runs_dir=runs_dir)
    window.resize(1400, 900)
    window.show()
    idle = _until_idle(lambda: not window.runs.is_filling() and window.runs.tree.topLevelItemCount() > 0)
    out = {"launch_s": idle - started, "launch_rss": _status("VmRSS"), "launch_peak_rss": _status("VmHWM")}
    tree = window.runs.tree
    item = next(tree.topLevelItem(i) for i in range(tree.topLevelItemCount())
                if Path(tree.topLevelItem(i).data(0, PATH_ROLE)).name == run_name)
    tree.setCurrentItem(item)
    clicked = time.monotonic()
    tree.itemDoubleClicked.emit(item, 0)

    def shown() -> bool:  # a big run is read on a Background thread, then shown
        return not window.files.is_reading() and len(window.training_tab.history.training.steps) > 0

    idle = _until_idle(shown)
    steps = len(window.training_tab.history.training.steps)
    out.update(open_s=idle - clicked, open_rss=_status("VmRSS"), peak_rss=_status("VmHWM"), steps_shown=steps)
    print(json.dumps(out), flush=True)
    window.close()


# ---- measured from here ------------------------------------------------------------------------
def _rusage_run(command: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """(wall seconds, peak RSS bytes, stdout bytes) of one process: ``common.peak_run``, whose
    wrapper forks it (this process's own ``wait4`` would report at least this process's RSS)."""
    try:
        seconds, peak, out, _ = common.peak_run(command, env)
    except RuntimeError as e:
        raise SystemExit(f"bench_long_runs: {e}") from None
    return seconds, peak, out


def _cold(run_dir: Path) -> None:
    (run_dir / rundir.SUMMARY_FILE).unlink(missing_ok=True)


def _line_figures(source: Path, work: Path, repeats: int = 7) -> list[dict]:
    figures = []
    for replicas in (2, 8):
        lines, first = {}, {}
        for form in ("old", "new"):
            run = long_runs.write_run(source, work / "lines", 2000, replicas, form)
            data = (run / rundir.EVENTS_FILE).read_bytes().splitlines()
            first[form], lines[form] = data[0], [line for line in data if line.startswith(b'{"type":"step"')]
        decoder = LineDecoder()
        started, steps = decoder.line(first["new"]), [decoder.line(line) for line in lines["new"]]
        times: dict[str, list[float]] = {"old": [], "new": []}
        writes: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(repeats):  # interleaved: load from elsewhere hits both forms alike
            for form in ("old", "new"):
                decoder = LineDecoder()
                decoder.line(first[form])
                t = time.perf_counter()
                for line in lines[form]:
                    decoder.line(line)
                times[form].append((time.perf_counter() - t) / len(lines[form]) * 1e6)
                # The engine's side: encode and serialise each step as EventWriter.emit does.
                encoder = LineEncoder(long_runs.FORMS[form])
                encoder.encode(started)
                t = time.perf_counter()
                for step in steps:
                    json.dumps(encoder.encode(step), separators=(",", ":"))
                writes[form].append((time.perf_counter() - t) / len(steps) * 1e6)
        for form in ("old", "new"):
            size = statistics.mean(len(line) + 1 for line in lines[form])
            figures.append(common.figure(f"step line, {replicas} replicas, {form}: bytes", [size], None, unit="B"))
            figures.append(common.figure(f"step line, {replicas} replicas, {form}: decode", times[form], None,
                                         "lower", "us"))
            figures.append(common.figure(f"step line, {replicas} replicas, {form}: encode", writes[form], None,
                                         "lower", "us"))
    shutil.rmtree(work / "lines", ignore_errors=True)
    return figures


def _engine_rate(env: dict[str, str], work: Path) -> float:
    runs = Path(tempfile.mkdtemp(dir=work))
    config = runs / "config.json"
    config.write_text(json.dumps(ENGINE_CONFIG))
    common.timed(app_command("train", str(config), "--runs-dir", str(runs), "--events", "none"), env, timeout=1800)
    from gui_app.core.events import Step

    events = rundir.read_events(next(runs.glob("*/events.jsonl")).parent, parts=False)
    rates = [e.examples_per_sec for e in events if isinstance(e, Step) and e.examples_per_sec][5:]  # past warm-up
    shutil.rmtree(runs, ignore_errors=True)
    return statistics.median(rates)


def _engine_figures(variants: dict[str, dict[str, str]], pairs: int, work: Path) -> list[dict]:
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for i in range(pairs):
        order = list(variants) if i % 2 == 0 else list(reversed(variants))  # alternate who goes first
        for name in order:
            rates[name].append(_engine_rate(common.env(**variants[name]), work))
    first = next(iter(variants))
    figures = [common.figure(f"engine examples/s, {name}", values, None, unit="ex/s",
                             command=" ".join(f"{k}={v}" for k, v in variants[name].items()) or "(default)")
               for name, values in rates.items()]
    for name in list(variants)[1:]:
        ratios = [a / b for a, b in zip(rates[name], rates[first])]
        figures.append(common.figure(f"engine examples/s, {name} / {first}", ratios, None))
    return figures


RECORD_STEPS = 16_384  # 64 finest buckets: the records' NumPy work every 256 steps is in it


def _record_figures(form: str, run_dir: Path, work: Path, repeats: int) -> dict[str, list[float]]:
    """The engine's per-step work on ``run_dir``'s first steps (see ``records`` above), interleaved."""
    from gui_app.core.events import Step
    from gui_app.core.history.pyramid_files import events_from
    from gui_app.engine.run.records import RunRecords

    items = []
    with open(run_dir / rundir.EVENTS_FILE, "rb") as f:
        for event, start, end in events_from(f, 0):
            items.append((event, start, end))
            if getattr(event, "step", 0) >= RECORD_STEPS:
                break
    steps = sum(1 for event, _, _ in items if isinstance(event, Step))
    out: dict[str, list[float]] = {}
    encoder = LineEncoder(long_runs.FORMS[form])
    for _ in range(repeats):
        t = time.perf_counter()
        for event, _, _ in items:
            json.dumps(encoder.encode(event), separators=(",", ":"))
        out.setdefault(f"{form}: engine per step: its line, encode + dumps (us)", []).append(
            (time.perf_counter() - t) / steps * 1e6)
        for name, history in (("history kept", "1"), ("no history", "0")):
            folder = Path(tempfile.mkdtemp(dir=work))
            (folder / rundir.EVENTS_FILE).write_bytes(b"")
            old = os.environ.get(HISTORY_ENV)
            os.environ[HISTORY_ENV] = history
            try:
                records = RunRecords(folder, (folder / rundir.EVENTS_FILE).stat().st_ino)
                t = time.perf_counter()
                for event, start, end in items:
                    records.add(event, start, end)
                records.close()
                seconds = time.perf_counter() - t
            finally:
                if old is None:
                    os.environ.pop(HISTORY_ENV)
                else:
                    os.environ[HISTORY_ENV] = old
                shutil.rmtree(folder, ignore_errors=True)
            out.setdefault(f"{form}: engine per step: RunRecords.add, {name} (us)", []).append(seconds / steps * 1e6)
    return out


def _run_figures(form: str, run_dir: Path, sections: set[str], replay: bool = True) -> dict[str, list[float]]:
    """One repeat's figures of one form (every section that reads the synthetic run)."""
    env = common.env()
    out: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        out.setdefault(f"{form}: {name}", []).append(value)

    if "window" in sections:
        with tempfile.TemporaryDirectory() as home:
            _cold(run_dir)
            child_env = dict(env, HOME=home, REPLICA_STUDIO_CONFIG_DIR=f"{home}/config", XDG_RUNTIME_DIR=home)
            started = time.monotonic()
            done = subprocess.run([common.PYTHON, __file__, "--child", str(run_dir.parent), run_dir.name, str(started)],
                                  capture_output=True, text=True, env=child_env, timeout=3600, cwd=str(common.ROOT))
            if done.returncode != 0:
                raise SystemExit(f"bench_long_runs: the window failed: {done.stderr[-3000:]}")
            report = json.loads(done.stdout.strip().splitlines()[-1])
            add("window launch to idle, run list filled (s)", report["launch_s"])
            add("window RSS after launch (MB)", report["launch_rss"] / MB)
            add("window peak RSS during launch (MB)", report["launch_peak_rss"] / MB)
            add("open to idle after double-click (s)", report["open_s"])
            add("window peak RSS (MB)", report["peak_rss"] / MB)
            add("open: steps in the training charts' history", report["steps_shown"])
    if "runs" in sections:
        _cold(run_dir)
        seconds, rss, _ = _rusage_run(app_command("runs", "--runs-dir", str(run_dir.parent)), env)
        add("runs, cold (s)", seconds)
        add("runs, cold, peak RSS (MB)", rss / MB)
    if "compare" in sections:
        seconds, rss, _ = _rusage_run(app_command("compare", str(run_dir), str(run_dir)), env)
        add("compare RUN RUN (s)", seconds)
        add("compare RUN RUN, peak RSS (MB)", rss / MB)
    if "attach" in sections and replay:
        seconds, rss, sent = _rusage_run(app_command("attach", str(run_dir), "--control", "none"), env)
        add("attach, every line (s)", seconds)
        add("attach, every line: bytes (MB)", sent / MB)
    if "attach" in sections:
        seconds, rss, sent = _rusage_run(app_command("attach", str(run_dir), "--history", "--control", "none"), env)
        add("attach --history (s)", seconds)
        add("attach --history: bytes before the live tail (MB)", sent / MB)
        add("attach --history: peak RSS (MB)", rss / MB)
    return out


def _ssh_figures(runs: dict[str, Path], repeats: int, replays: int) -> dict[str, list[float]]:
    """Re-attachments over the SSH test host, each run moved into its user's home meanwhile."""
    sys.path.insert(0, str(common.ROOT / "tests"))
    from ssh_host import ALIAS, running_host

    from gui_app.core.ssh_hosts import Host, add_host

    out: dict[str, list[float]] = {}
    with running_host() as host, tempfile.TemporaryDirectory() as config:
        add_host(Host(ALIAS, command=host.command), Path(config) / "hosts.json")
        env = host.env(config)
        there = {form: host.home / run.name for form, run in runs.items()}
        try:
            for form, run in runs.items():
                shutil.move(str(run), there[form])
                subprocess.run(["chown", "-R", f"{host.user}:{host.user}", str(there[form])], check=True)
            for i in range(repeats):
                for form, run in there.items():
                    kinds = [("--history", "attach --host --history")] + ([("", "attach --host, every line")]
                                                                         if i < replays else [])
                    for flag, name in kinds:
                        command = app_command("attach", "--host", ALIAS, str(run), *filter(None, [flag]),
                                              "--control", "none")
                        seconds, _, sent = _rusage_run(command, env)
                        out.setdefault(f"{form}: {name} (s)", []).append(seconds)
                        out.setdefault(f"{form}: {name}: bytes (MB)", []).append(sent / MB)
        finally:
            for form, run in runs.items():
                if there[form].exists():
                    shutil.move(str(there[form]), run)
                    subprocess.run(["chown", "-R", f"{os.getuid()}:{os.getgid()}", str(run)], check=False)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        window_child(argv[1], argv[2], float(argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=100, help="epochs of the synthetic runs")
    parser.add_argument("--forms", default="old,new")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default=",".join(SECTIONS))
    parser.add_argument("--source", help="the real short run to repeat (default: trained now)")
    parser.add_argument("--work", help="where the runs are written (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic runs")
    parser.add_argument("--reuse", action="store_true",
                        help="read the runs a --keep left in --work (STEPSxREPLICAS-FORM) instead of writing them; "
                             "keeps them")
    parser.add_argument("--engine-variant", action="append", default=[], metavar="NAME:VAR=VALUE")
    parser.add_argument("--pairs", type=int, default=3, help="engine pairs")
    parser.add_argument("--no-pyramid", action="store_true", help="write the runs without their history/")
    parser.add_argument("--replays", type=int, default=1,
                        help="attach, ssh: the repeats that also replay every line (the rest: --history only)")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args(argv)
    sections = set(args.only.split(","))
    if not sections <= set(SECTIONS):
        parser.error(f"--only: choose from {', '.join(SECTIONS)}")
    if args.reuse and not args.work:
        parser.error("--reuse needs --work")
    forms = args.forms.split(",")
    work = Path(args.work or tempfile.mkdtemp(prefix="long-runs-"))
    work.mkdir(parents=True, exist_ok=True)
    source = Path(args.source) if args.source else long_runs.make_source(work / "source")
    figures: list[dict] = []
    if "lines" in sections:
        figures += _line_figures(source, work)
        common.show(figures)
    if "engine" in sections:
        variants = {"lean": {}, "no history": {HISTORY_ENV: "0"}}
        for spec in args.engine_variant:
            name, _, assignment = spec.partition(":")
            key, _, value = assignment.partition("=")
            variants.setdefault(name, {})[key] = value
        figures += _engine_figures(variants, args.pairs, work)
        common.show(figures[-len(variants) * 2 + 1:])
    if sections & {"window", "runs", "compare", "attach", "ssh", "records"}:
        runs = {}
        for form in forms:
            started = time.monotonic()
            existing = work / form / f"{args.steps}x{args.replicas}-{form}"
            if args.reuse and (existing / rundir.EVENTS_FILE).is_file():
                runs[form], done = existing, "reused"
            else:
                runs[form] = long_runs.write_run(source, work / form, args.steps, args.replicas, form,
                                                 epochs=args.epochs)
                done = f"written in {time.monotonic() - started:.0f} s"
            size = (runs[form] / rundir.EVENTS_FILE).stat().st_size
            print(f"  {form}: {args.steps:,} x {args.replicas}: {size / MB:,.0f} MB {done}", flush=True)
            if not args.no_pyramid:
                started = time.monotonic()
                update_pyramid(runs[form], runs[form] / rundir.EVENTS_FILE)
                kept = sum(f.stat().st_size for f in (runs[form] / rundir.HISTORY_DIR).iterdir())
                print(f"  {form}: its history/ built in {time.monotonic() - started:.0f} s: {kept / MB:.1f} MB",
                      flush=True)
        samples: dict[str, list[float]] = {}
        for i in range(args.repeats if sections & {"window", "runs", "compare", "attach"} else 0):
            for form in forms:  # interleaved: load from elsewhere hits every form alike
                for name, values in _run_figures(form, runs[form], sections, i < args.replays).items():
                    samples.setdefault(name, []).extend(values)
        if "ssh" in sections:
            samples.update(_ssh_figures(runs, args.repeats, args.replays))
        if "records" in sections:
            for form in forms:
                samples.update(_record_figures(form, runs[form], work, args.repeats))
        label = f"{args.steps:,} x {args.replicas}"
        run_figures = [common.figure(f"{label} {name}", values, None, "lower", "")
                       for name, values in samples.items()]
        common.show(run_figures)
        figures += run_figures
        if not args.keep and not args.reuse:
            for form in forms:
                shutil.rmtree(work / form, ignore_errors=True)
    if not args.work and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return common.finish(figures, args.json_out)


if __name__ == "__main__":
    sys.exit(main())
