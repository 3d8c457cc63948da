"""Run directories: where a run keeps its config, events, checkpoints, model and evaluation.

Layout of one run::

    <runs dir>/<YYYYmmdd-HHMMSS>-<dataset>-<model>/
        config.json      the RunConfig, as started
        events.jsonl     every event, appended and flushed as it happens
        checkpoints/     tf.train.CheckpointManager files
        model.keras      the trained model (after a completed run)
        eval.json        the last evaluation (the `eval` event without type/time)
        misclassified.npz  x, y_true, y_pred, confidence, index of wrong test predictions
        tensorboard/     train/ and validation/ summaries for TensorBoard
        summary.json     the run list's cache of the events (status, step, accuracy)
        history/         the run's history at several resolutions, a cache of the events
                         (gui_app/core/history/pyramid.py)
        process.json     the process that runs (or last ran) it: id, host (gui_app/core/live_runs.py)
        workers.json     a cluster's: each worker's process id and host, from its status reports
        engine.log       a detached run's stdout and stderr
        .control/fifo    the running process's control channel (engine/run/control_fifo.py)
        .lock            held by the process working on the run (gui_app/core/run_lock.py)

Events are decoded once, here, into the types of gui_app.core.events; :func:`read_history`
folds them into the run model (gui_app.core.history) the window shows. A run's status is read
from its events (gui_app.core.history.status); ``stopped``, ``interrupted`` and ``failed`` runs
with a checkpoint can be resumed (a failed one after lowering the batch or the rate:
``resume --set``).

``events.jsonl`` holds each step once (a resumed run drops the steps after its checkpoint from
it: gui_app/core/events_file.py); one written before that rule may hold a step twice, of which
:func:`read_events` keeps the last one written (the one the continued run built on).
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple

from gui_app.core import run_lock
from gui_app.core.config import RunConfig
from gui_app.core.event_codec import build
from gui_app.core.event_lines import LineDecoder
from gui_app.core.events import Continued, EpochEnd, Eval, Event, Paused, RunStarted, Step, decode_line
from gui_app.core.history import RunHistory, coarse, pyramid
from gui_app.core.history.pyramid import Meta
from gui_app.core.history.pyramid_files import events_from, steps_between, update_pyramid
from gui_app.core.run_summary import EVENTS_FILE, summarize_events
from gui_app.core.run_summary import SUMMARY_FILE as SUMMARY_FILE  # the run folder's names are all here

RUNS_DIR_ENV = "REPLICA_STUDIO_RUNS_DIR"
SWEEPS_DIR_ENV = "REPLICA_STUDIO_SWEEPS_DIR"

CONFIG_FILE = "config.json"
CHECKPOINT_DIR = "checkpoints"
MODEL_FILE = "model.keras"
EVAL_FILE = "eval.json"
MISCLASSIFIED_FILE = "misclassified.npz"  # up to 64 wrong test predictions, for the gallery
TENSORBOARD_DIR = "tensorboard"
LOG_FILE = "engine.log"  # a detached run's stdout and stderr
HISTORY_DIR = pyramid.FOLDER  # the history at several resolutions (named where its format is)

RESUMABLE = ("stopped", "interrupted", "failed")


def default_runs_dir() -> Path:
    """``$REPLICA_STUDIO_RUNS_DIR`` if set, else ``runs`` in the user data folder."""
    return _user_data_folder(RUNS_DIR_ENV, "runs")


def default_sweeps_dir() -> Path:
    """``$REPLICA_STUDIO_SWEEPS_DIR`` if set, else ``sweeps`` in the user data folder (beside ``runs``)."""
    return _user_data_folder(SWEEPS_DIR_ENV, "sweeps")


def _user_data_folder(env_name: str, name: str) -> Path:
    env = os.environ.get(env_name)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("replica-studio", appauthor=False)) / name


def run_name(config: RunConfig) -> str:
    """A new run's directory name: when it started, its dataset and model."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{config.dataset.name}-{config.model.name}"


def create_run_dir(runs_dir: str | Path, config: RunConfig) -> Path:
    """Make a new, uniquely named run directory and write its config into it."""
    path = new_folder(Path(runs_dir), run_name(config), "a run directory")
    config.save(path / CONFIG_FILE)
    return path


def new_folder(parent: Path, stem: str, what: str) -> Path:
    """Make ``parent/stem`` (``stem-1``, ``stem-2``... when taken), atomically against another
    process making the same name: a run directory, a sweep folder."""
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file where the folder should be: say so, not "[Errno 17] File exists"
        raise OSError(f"{parent} is a file, not a folder") from None
    for n in range(1000):
        path = parent / (stem if n == 0 else f"{stem}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise OSError(f"cannot create {what} under {parent}")


def events_bytes(run_dir: str | Path) -> int:
    """The size of the run's events.jsonl (0 when there is none): what reading it costs."""
    try:
        return (Path(run_dir) / EVENTS_FILE).stat().st_size
    except OSError:
        return 0


def is_run_dir(path: str | Path) -> bool:
    return (Path(path) / CONFIG_FILE).is_file()


def read_raw_events(run_dir: str | Path, parts: bool = True) -> Iterator[Event]:
    """Every event as written; torn or damaged lines (the process died mid-write) and lines that
    are not events are skipped. Without ``parts`` steps come without their replicas (faster)."""
    path = Path(run_dir) / EVENTS_FILE
    if not path.exists():
        return
    decoder = LineDecoder()  # a lean step's replicas get their devices from the run_started before
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            event = decoder.line(line, parts)
            if event is not None:
                yield event


def _point(event: Event) -> tuple[type, int] | None:
    """What numbers an event that is one point of the history: its step, or its epoch."""
    if isinstance(event, Step):
        return Step, event.step
    if isinstance(event, EpochEnd):
        return EpochEnd, event.epoch
    return None


def dedupe_points(events: list[Event]) -> list[Event]:
    """One ``step`` per step number and one ``epoch_end`` per epoch: the last written, in the
    place it was written (so a resumed run reads as one history with no double points)."""
    last = {_point(event): i for i, event in enumerate(events)}
    return [event for i, event in enumerate(events) if (key := _point(event)) is None or last[key] == i]


def read_events(run_dir: str | Path, parts: bool = True) -> list[Event]:
    """The events of a run, one point per step (see :func:`dedupe_points`)."""
    return dedupe_points(list(read_raw_events(run_dir, parts)))


def read_eval(run_dir: str | Path) -> Eval | None:
    """The run's last evaluation (``eval.json``); None when it has none. ValueError naming the
    file when it cannot be read."""
    path = Path(run_dir) / EVAL_FILE
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read the evaluation: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return build(Eval, value)


# A run of more steps than this (and of an events file this large) is shown from its pyramid:
# the whole run in at most coarse.MAX_BUCKETS buckets per series, then its last events.
LONG_RUN_STEPS = 10_000
LONG_RUN_BYTES = 8 << 20


def read_history(run_dir: str | Path) -> RunHistory:
    """A run as the window shows it: its events folded (a long run's from its pyramid, see
    :func:`read_long_history`), then its evaluation from eval.json (an unreadable one is left out
    and named in ``history.problems``)."""
    long = read_long_history(run_dir)
    return long if long is not None else _history(run_dir, read_events(run_dir))


@dataclass
class LongRun:
    """A long run as its readers take it: the pyramid (``meta``, its ``folder``), the latest
    ``run_started``, and the events after the offset the pyramid covers (``tail``, one point
    per step)."""

    meta: Meta
    folder: Path
    started: RunStarted | None
    tail: list[Event]

    def buckets(self, max_buckets: int = coarse.MAX_BUCKETS) -> coarse.Buckets:
        return coarse.buckets(self.folder, self.meta, max_buckets=max_buckets)

    def duration(self) -> float | None:
        """Seconds the run's processes worked, as :func:`comparison.run_duration` counts them."""
        return sum(end - start for start, end in self.meta.processes) if self.meta.processes else None


def read_long_run(run_dir: str | Path, min_steps: int = LONG_RUN_STEPS) -> LongRun | None:
    """The pyramid of a run of more than ``min_steps`` steps (and an events file of at least
    :data:`LONG_RUN_BYTES`), caught up first (or built, once, for an old run) unless the run is
    live: its engine keeps it. None for a shorter run, or one whose pyramid cannot be had:
    read its events."""
    run_dir = Path(run_dir)
    path = run_dir / EVENTS_FILE
    try:
        if path.stat().st_size < LONG_RUN_BYTES and min_steps == LONG_RUN_STEPS:
            return None
    except OSError:
        return None
    meta = update_pyramid(run_dir, path, write=run_lock.holder(run_dir) is None)
    if meta is None or meta.last_step <= min_steps:
        return None
    with path.open("rb") as f:
        started = None
        if 0 <= meta.started_at < meta.offset:  # else it is among the tail's events
            f.seek(meta.started_at)
            started = decode_line(f.readline())
        tail = dedupe_points([event for event, _, _ in events_from(f, meta.offset)])
    return LongRun(meta, run_dir / HISTORY_DIR, started if isinstance(started, RunStarted) else None, tail)


def read_long_history(run_dir: str | Path, min_steps: int = LONG_RUN_STEPS) -> RunHistory | None:
    """A long run in bounded memory: its pyramid's coarse buckets over the whole run (each
    bucket's min and max: coarse.fold_buckets), then the events after the offset the pyramid
    covers, folded as events. None for a run to read whole (see :func:`read_long_run`)."""
    long = read_long_run(run_dir, min_steps)
    if long is None:
        return None
    history = coarse.long_history(long.buckets(), long.started, summarize_events(run_dir).started)
    history.add(long.tail)
    return _history(run_dir, [], history)


DETAIL_STEPS = 8_192  # a range of at most this many steps is read from the events: every step


def read_detail(run_dir: str | Path, first: int, last: int) -> RunHistory | None:
    """Steps ``first..last`` of a long run at the finest resolution there is: every step, read
    from the events (a binary search away) when the range is short, else the buckets of the
    finest level with at most coarse.MAX_BUCKETS of them. None when the run is not long."""
    long = read_long_run(run_dir)
    if long is None:
        return None
    history = RunHistory()
    if long.started is not None:
        history.add([long.started])
    if last - first < DETAIL_STEPS:
        history.add([e for e, _, _ in steps_between(Path(run_dir) / EVENTS_FILE, first, last)])
    else:
        coarse.fold_buckets(history, coarse.buckets(long.folder, long.meta, first, last))
        history.add([e for e in long.tail if isinstance(e, Step) and first <= e.step <= last])
    return history


class HistorySoFar(NamedTuple):
    history: RunHistory
    lines: int  # the complete lines of events.jsonl it holds
    paused: bool  # the run's last word was a pause
    inode: int = 0  # the inode of the events.jsonl read (a resume replaces the file: ``attach --inode``)


def read_history_so_far(run_dir: str | Path) -> HistorySoFar:
    """:func:`read_history` of the complete lines of ``events.jsonl`` as it is now, and how many
    lines that is: ``attach --from`` that line goes on where the history ends, each line once."""
    try:
        with open(Path(run_dir) / EVENTS_FILE, "rb") as f:
            inode = os.fstat(f.fileno()).st_ino  # of the very file read
            data = f.read()
    except FileNotFoundError:
        data, inode = b"", 0
    lines = data[:data.rfind(b"\n") + 1].splitlines()
    events = [event for event in map(LineDecoder().line, lines) if event is not None]
    last_word = next((e for e in reversed(events) if isinstance(e, (Paused, Continued, RunStarted))), None)
    return HistorySoFar(_history(run_dir, dedupe_points(events)), len(lines), isinstance(last_word, Paused), inode)


def _history(run_dir: str | Path, events: list[Event], history: RunHistory | None = None) -> RunHistory:
    history = history or RunHistory()
    history.add(events)
    history.run_dir = str(run_dir)  # where it is now (its run_started says where it was written)
    try:
        evaluation = read_eval(run_dir)
    except ValueError as exc:
        history.problems.append(str(exc))
    else:
        if evaluation is not None:
            history.set_evaluation(evaluation, str(Path(run_dir) / EVAL_FILE))
    return history


@dataclass
class RunInfo:
    """What the run list shows of one run, read from its directory."""

    path: Path
    config: RunConfig | None
    status: str  # completed | stopped | failed | interrupted | new | unreadable (no config.json to read, no event)
    started: float | None = None
    step: int = 0
    total_steps: int | None = None
    test_accuracy: float | None = None
    message: str | None = None
    has_model: bool = False
    cluster_resumable: bool = False  # a failed cluster: its run_finished says resume can restart it
    trial: str | None = None  # "sweep NAME trial K" for a sweep's trial (gui_app.core.sweep_runs)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def resumable(self) -> bool:
        if self.status == "failed":  # only once it trained far enough to write a checkpoint
            return has_checkpoint(self.path)
        # A failed cluster (a worker died) is resumable too: its run_finished says so.
        return (self.status in RESUMABLE or self.cluster_resumable) and (self.path / CHECKPOINT_DIR).is_dir()


def has_checkpoint(run_dir: str | Path) -> bool:
    folder = Path(run_dir) / CHECKPOINT_DIR
    return folder.is_dir() and any(folder.glob("ckpt-*.index"))


def read_run(run_dir: str | Path) -> RunInfo:
    run_dir = Path(run_dir)
    problem = ""
    try:
        config = RunConfig.load(run_dir / CONFIG_FILE)
    except ValueError as exc:
        config, problem = None, f"{CONFIG_FILE} cannot be read: {exc}"
    info = RunInfo(path=run_dir, config=config, has_model=(run_dir / MODEL_FILE).exists(),
                   **dataclasses.asdict(summarize_events(run_dir)))
    if config is None and info.status == "new":  # nothing says it ever ran: not a new run, a damaged one
        info.status, info.message = "unreadable", problem
    if info.started is None:
        try:
            info.started = (run_dir / CONFIG_FILE).stat().st_mtime
        except OSError:
            pass
    return info


def run_dirs(runs_dir: str | Path) -> list[Path]:
    """The run folders under ``runs_dir``, newest name first (names start with the start time),
    so the rows a user looks for first arrive first."""
    try:
        found = [p for p in Path(runs_dir).iterdir() if (p / CONFIG_FILE).is_file()]
    except OSError:  # missing, or not readable: no runs to show
        return []
    return sorted(found, key=lambda p: p.name, reverse=True)


def list_runs(runs_dir: str | Path) -> list[RunInfo]:
    """Every run under ``runs_dir``, read as the run list reads them, newest first (for scripts
    and tests: the window reads :func:`run_dirs` in batches, off its GUI thread)."""
    return [read_run(p) for p in run_dirs(runs_dir)]
