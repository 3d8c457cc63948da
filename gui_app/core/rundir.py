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

A run's status is read from its events: the last ``run_finished`` says completed, stopped
or failed; a run with no ``run_finished`` after its last ``run_started`` was killed
(``interrupted``). ``stopped``, ``interrupted`` and ``failed`` runs with a checkpoint can be
resumed (a failed one after lowering the batch or the rate: ``resume --set``).

A resumed run replays the steps after its last checkpoint, so ``events.jsonl`` may hold a step
twice; :func:`read_events` keeps the last one written (the one the continued run built on).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from gui_app.core.config import RunConfig

RUNS_DIR_ENV = "REPLICA_STUDIO_RUNS_DIR"

CONFIG_FILE = "config.json"
EVENTS_FILE = "events.jsonl"
CHECKPOINT_DIR = "checkpoints"
MODEL_FILE = "model.keras"
EVAL_FILE = "eval.json"
MISCLASSIFIED_FILE = "misclassified.npz"  # up to 64 wrong test predictions, for the gallery
TENSORBOARD_DIR = "tensorboard"
SUMMARY_FILE = "summary.json"  # a cache of what the run list shows, rebuilt from the events

RESUMABLE = ("stopped", "interrupted", "failed")

# What the app can open as a model, by file name ending (folders: SavedModel or run).
MODEL_SUFFIXES = {".keras": "keras", ".tflite": "tflite", ".onnx": "onnx"}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
SAVED_MODEL_FILE = "saved_model.pb"


def default_runs_dir() -> Path:
    """``$REPLICA_STUDIO_RUNS_DIR`` if set, else ``runs`` in the user data folder."""
    env = os.environ.get(RUNS_DIR_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("replica-studio", appauthor=False)) / "runs"


def create_run_dir(runs_dir: str | Path, config: RunConfig) -> Path:
    """Make a new, uniquely named run directory and write its config into it."""
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{config.dataset.name}-{config.model.name}"
    for n in range(1000):
        path = runs_dir / (stem if n == 0 else f"{stem}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        config.save(path / CONFIG_FILE)
        return path
    raise OSError(f"cannot create a run directory under {runs_dir}")


def is_run_dir(path: str | Path) -> bool:
    return (Path(path) / CONFIG_FILE).is_file()


def is_image_file(path: str | Path) -> bool:
    path = Path(path)
    return path.suffix.lower() in IMAGE_SUFFIXES and not path.is_dir()


def model_kind(path: str | Path) -> str | None:
    """What kind of model ``path`` is, by its name and folder layout: ``run`` (a run folder
    with a trained model), ``savedmodel``, ``keras``, ``tflite``, ``onnx``; None when it is
    none of these (or a run that has not finished training)."""
    path = Path(path)
    if path.is_dir():
        if (path / SAVED_MODEL_FILE).is_file():
            return "savedmodel"
        return "run" if is_run_dir(path) and (path / MODEL_FILE).is_file() else None
    return MODEL_SUFFIXES.get(path.suffix.lower())


def model_source(path: str | Path) -> Path:
    """What to load for a chosen file: a SavedModel's ``saved_model.pb`` means its folder, and
    a run's ``model.keras`` means the run (which adds the softmax and the class names the bare
    file lacks: it outputs logits and has no model card)."""
    path = Path(path)
    if path.name == SAVED_MODEL_FILE or (path.name == MODEL_FILE and is_run_dir(path.parent)):
        return path.parent
    return path


def read_raw_events(run_dir: str | Path) -> Iterator[dict[str, Any]]:
    """Every event line as written; torn or damaged lines (the process died mid-write) are skipped."""
    path = Path(run_dir) / EVENTS_FILE
    if not path.exists():
        return
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(event, dict) and isinstance(event.get("type"), str):
                yield event


# Events that describe one point of the history, by the key that numbers it.
_POINT_KEYS = {"step": "step", "epoch_end": "epoch"}


def dedupe_points(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ``step`` per step number and one ``epoch_end`` per epoch: the last written, in the
    place it was written (so a resumed run reads as one history with no double points)."""
    last: dict[tuple[str, Any], int] = {}
    for i, event in enumerate(events):
        key = _POINT_KEYS.get(event["type"])
        if key is not None and key in event:
            last[(event["type"], event[key])] = i
    out = []
    for i, event in enumerate(events):
        key = _POINT_KEYS.get(event["type"])
        if key is not None and key in event and last[(event["type"], event[key])] != i:
            continue
        out.append(event)
    return out


def read_events(run_dir: str | Path) -> list[dict[str, Any]]:
    """The events of a run, one point per step (see :func:`dedupe_points`)."""
    return dedupe_points(list(read_raw_events(run_dir)))


@dataclass
class RunInfo:
    """What the run list shows of one run, read from its directory."""

    path: Path
    config: RunConfig | None
    status: str  # completed | stopped | failed | interrupted | new
    started: float | None = None
    step: int = 0
    total_steps: int | None = None
    test_accuracy: float | None = None
    message: str | None = None
    has_model: bool = False
    cluster_resumable: bool = False  # a failed cluster: its run_finished says resume can restart it

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


# What the run list needs of a run's events, folded line by line; cached in SUMMARY_FILE with
# the byte offset it has read up to, so listing 1,000 runs reads only what was appended since.
_FOLD_FIELDS = ("status", "started", "step", "total_steps", "test_accuracy", "message", "cluster_resumable")
_SUMMARY_VERSION = 2


def _fold(state: dict[str, Any], event: dict[str, Any]) -> None:
    kind = event["type"]
    if kind == "run_started":
        state["status"], state["message"], state["cluster_resumable"] = "interrupted", None, False
        if state["started"] is None:
            state["started"] = event.get("time")
        state["total_steps"] = event.get("total_steps")
    elif kind == "step":
        state["step"] = event.get("step", state["step"])
    elif kind == "eval":
        state["test_accuracy"] = event.get("accuracy")
    elif kind == "run_finished":
        state["status"] = event.get("status", "failed")
        state["step"] = event.get("step", state["step"])
        state["message"] = event.get("message")
        state["cluster_resumable"] = bool(event.get("resumable"))


def _fresh_state() -> dict[str, Any]:
    return {"status": "new", "started": None, "step": 0, "total_steps": None, "test_accuracy": None,
            "message": None, "cluster_resumable": False}


def _read_summary(run_dir: Path) -> tuple[dict[str, Any], int]:
    """The cached fold and its offset, or a fresh state at 0 when the cache is missing or unusable."""
    try:
        cached = json.loads((run_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
        if cached.get("version") == _SUMMARY_VERSION and set(cached["state"]) == set(_FOLD_FIELDS):
            return dict(cached["state"]), int(cached["offset"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return _fresh_state(), 0


def summarize_events(run_dir: str | Path) -> dict[str, Any]:
    """How the run stands by its events: status, started, step, total_steps, test_accuracy,
    message. Reads only the bytes appended since the cached summary (rebuilt from the start
    when the events file is shorter than the cache says: rewritten or replaced)."""
    run_dir = Path(run_dir)
    state, offset = _read_summary(run_dir)
    path = run_dir / EVENTS_FILE
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            if offset > size:
                state, offset = _fresh_state(), 0
            f.seek(offset)
            data = f.read()
    except OSError:
        return state
    end = data.rfind(b"\n") + 1  # a torn last line is read next time, once it is complete
    for line in data[:end].splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "type" in event:
            _fold(state, event)
    if end:
        _write_summary(run_dir, state, offset + end)
    return state


def _write_summary(run_dir: Path, state: dict[str, Any], offset: int) -> None:
    tmp = run_dir / f".{SUMMARY_FILE}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps({"version": _SUMMARY_VERSION, "offset": offset, "state": state}), encoding="utf-8")
        tmp.replace(run_dir / SUMMARY_FILE)
    except OSError:  # a read-only or full disk: the cache is only a cache
        tmp.unlink(missing_ok=True)


def read_run(run_dir: str | Path) -> RunInfo:
    run_dir = Path(run_dir)
    try:
        config = RunConfig.load(run_dir / CONFIG_FILE)
    except ValueError:
        config = None
    info = RunInfo(path=run_dir, config=config, has_model=(run_dir / MODEL_FILE).exists(),
                   **summarize_events(run_dir))
    if info.started is None:
        try:
            info.started = (run_dir / CONFIG_FILE).stat().st_mtime
        except OSError:
            pass
    return info


def list_runs(runs_dir: str | Path) -> list[RunInfo]:
    """Every run under ``runs_dir``, newest first."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    runs = [read_run(p) for p in runs_dir.iterdir() if (p / CONFIG_FILE).is_file()]
    return sorted(runs, key=lambda r: r.started or 0.0, reverse=True)
