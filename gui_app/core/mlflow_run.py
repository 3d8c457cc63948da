"""A run folder as what an MLflow run holds, read without MLflow (``replica-studio export-run``
writes it with MLflow's client, gui_app/engine/commands/export_run.py): the config as params (dotted
keys, as the comparison flattens it), every step's and epoch's figures as metrics with their
steps, each replica's figures under its own keys (``replica_0/loss``), tags (the strategy in the
run list's words, devices, workers, status, the app's release), the run's start and end, and the
files to keep as artifacts (config, evaluation, the exports and their model cards, the model).

The run's identity (its folder's name and its first ``run_started`` time) finds an earlier export
of the same run; its fingerprint (the bytes of what is exported) says whether that export is
still current. Qt-free and TensorFlow-free.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gui_app import __version__
from gui_app.core import rundir
from gui_app.core.events import EpochEnd, Eval, RunFinished, RunStarted, Step
from gui_app.core.overrides import flatten
from gui_app.core.report.record import read_record

# The tags that find an earlier export and say whether it is current (MLflow's convention: a
# namespace of our own, so they never collide with mlflow.* or a user's tags).
IDENTITY_TAG = "replica_studio.run"
FINGERPRINT_TAG = "replica_studio.fingerprint"
STEP_FIGURES = ("loss", "accuracy", "learning_rate", "examples_per_sec", "step_time", "input_wait")
EPOCH_FIGURES = ("loss", "accuracy", "val_loss", "val_accuracy")
REPLICA_FIGURES = ("loss", "accuracy", "examples_per_sec", "step_time", "grad_norm")
# The run's status as MLflow names it; a run still training (or never finished) stays RUNNING.
STATUSES = {"completed": "FINISHED", "failed": "FAILED", "stopped": "KILLED", "interrupted": "KILLED"}
PARAM_LENGTH = 6000  # MLflow's limit on a param's value (mlflow.utils.validation.MAX_PARAM_VAL_LENGTH)


@dataclass
class MlflowRecord:
    run_dir: Path
    name: str
    identity: str
    fingerprint: str
    params: dict[str, str]
    tags: dict[str, str]
    metrics: list[tuple[str, float, int, int]] = field(default_factory=list)  # (key, value, time in ms, step)
    artifacts: list[tuple[Path, str | None]] = field(default_factory=list)  # (file or folder, artifact folder)
    start_ms: int | None = None
    end_ms: int | None = None
    status: str = "RUNNING"


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _param(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= PARAM_LENGTH else text[:PARAM_LENGTH - 1] + "…"


def _step_metrics(step: Step) -> list[tuple[str, float, int, int]]:
    t = _ms(step.time)
    out = [(name, float(v), t, step.step) for name in STEP_FIGURES if (v := getattr(step, name)) is not None]
    # A per_worker step carries one row per worker (a parameter-server run): keyed by worker.
    prefix = "worker" if step.per_worker else "replica"
    for row in step.replicas:
        index = row.worker if step.per_worker else row.replica
        out += [(f"{prefix}_{index}/{name}", float(v), t, step.step)
                for name in REPLICA_FIGURES if (v := getattr(row, name)) is not None]
    return out


def _epoch_metrics(epoch: EpochEnd) -> list[tuple[str, float, int, int]]:
    # MLflow plots every metric against its step: an epoch's figures at the step it ended on,
    # so the validation curve lies over the training loss (the epoch number is a metric too).
    t, step = _ms(epoch.time), epoch.step or epoch.epoch
    out = [("epoch", float(epoch.epoch), t, step)]
    return out + [(name if name.startswith("val_") else f"epoch_{name}", float(v), t, step)
                  for name in EPOCH_FIGURES if (v := getattr(epoch, name)) is not None]


def _fingerprint(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.name).encode())
        if path.is_file():
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
    return digest.hexdigest()[:32]


def _artifacts(run_dir: Path, cards: list[dict[str, Any]]) -> list[tuple[Path, str | None]]:
    out: list[tuple[Path, str | None]] = [(run_dir / rundir.CONFIG_FILE, None)]
    out += [(run_dir / name, None) for name in (rundir.EVAL_FILE, rundir.MODEL_FILE) if (run_dir / name).exists()]
    # The exports kept in the folder: each model card, and the exported file beside it when there.
    for card_path in sorted(run_dir.rglob("*.json")):
        rel = card_path.relative_to(run_dir)
        if rel.parts[0] in (rundir.CHECKPOINT_DIR, rundir.TENSORBOARD_DIR) or len(rel.parts) > 2:
            continue
        try:
            card = json.loads(card_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if not (isinstance(card, dict) and card in cards):  # a model card, as the report finds them
            continue
        folder = "exports" if len(rel.parts) == 1 or rel.parts[0] == "exports" else f"exports/{rel.parts[0]}"
        out.append((card_path, folder))
        exported = card_path.parent / str(card.get("file", ""))
        if card.get("file") and exported.exists() and exported.resolve().is_relative_to(run_dir.resolve()):
            out.append((exported, folder))
    return out


def read_mlflow_record(run_dir: str | Path) -> MlflowRecord:
    """ValueError (one line naming the folder) when ``run_dir`` is not a run folder."""
    record = read_record(run_dir)  # the checks, the strategy in the run list's words, the model cards
    run_dir = record.run_dir
    events = rundir.read_events(run_dir, parts=True)
    started = next((e for e in events if isinstance(e, RunStarted)), None)
    finished = [e for e in events if isinstance(e, RunFinished)]
    metrics: list[tuple[str, float, int, int]] = []
    last_step = 0
    for event in events:
        if isinstance(event, Step):
            metrics += _step_metrics(event)
            last_step = max(last_step, event.step)
        elif isinstance(event, EpochEnd):
            metrics += _epoch_metrics(event)
    evaluation = next((e for e in reversed(events) if isinstance(e, Eval)), None)
    if evaluation is not None:
        metrics += [(f"test_{name}", float(v), _ms(evaluation.time), last_step)
                    for name in ("loss", "accuracy") if (v := getattr(evaluation, name)) is not None]
    status = rundir.read_run(run_dir).status  # as the run list says it
    devices = [r.device.split("device:")[-1] for r in started.replicas] if started else []
    tags = {"strategy": record.strategy, "devices": ", ".join(devices) or "?",
            "workers": str(started.num_workers if started else 1), "status": str(status),
            "replicas": str(started.num_replicas if started else 1),
            "replica_studio.version": __version__}
    if started is not None:
        tags |= {k: str(v) for k, v in (("dataset", started.dataset.get("name")), ("model", started.model.get("name")))
                 if v}
    identity = f"{run_dir.name}@{_ms(started.time) if started else 'unstarted'}"
    artifacts = _artifacts(run_dir, record.cards)
    fingerprint = _fingerprint([run_dir / rundir.EVENTS_FILE] + [p for p, _ in artifacts if p.is_file()])
    tags |= {IDENTITY_TAG: identity, FINGERPRINT_TAG: fingerprint}
    return MlflowRecord(
        run_dir=run_dir, name=run_dir.name, identity=identity, fingerprint=fingerprint,
        params={key: _param(value) for key, value in flatten(record.config).items()}, tags=tags, metrics=metrics,
        artifacts=artifacts, start_ms=_ms(started.time) if started else None,
        end_ms=_ms(events[-1].time) if finished and events else None,
        status=STATUSES.get(str(status), "RUNNING"))
