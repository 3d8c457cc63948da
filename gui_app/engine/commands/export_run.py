"""``replica-studio export-run RUN_DIR|BUNDLE --mlflow TRACKING_URI_OR_DIR [--experiment NAME] [--json]``:
the run as an MLflow run (gui_app/core/mlflow_run.py reads it), written with MLflow's client.

A folder (or ``file://`` URI) is MLflow's file store; anything else with a scheme (``http://``,
``sqlite://``, ``databricks``) is handed to MLflow as it is. MLflow (``mlflow-skinny``, the
``[mlflow]`` extra) is imported here only, when the command runs: without it, one line saying how
to install it, exit 2.

Idempotent: an earlier export of the same run (the tag holding its folder's name and start time)
whose fingerprint matches is left as it is (``unchanged``); one whose fingerprint differs -- the
run trained on, was evaluated or exported since -- is deleted and the run written again
(``replaced``): MLflow appends a metric logged twice at a step rather than replacing it, and a
param cannot change, so a run cannot be updated in place without doubling its curves.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from gui_app.core import answers
from gui_app.core.mlflow_run import FINGERPRINT_TAG, IDENTITY_TAG, MlflowRecord, read_mlflow_record
from gui_app.engine.commands.bundle import run_folder
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK

COMMANDS = ("export-run",)
DEFAULT_EXPERIMENT = "Replica Studio"
INSTALL_HINT = "MLflow is not installed: pip install 'replica-studio[mlflow]' (or: pip install mlflow-skinny)"
# MLflow's log_batch limits (mlflow.utils.validation): 1000 metrics, 100 params or tags, 1000 in all.
METRICS_PER_BATCH = 1000
PARAMS_PER_BATCH = 100


class ExportError(ValueError):
    """Bad input or a store that cannot be written: one line."""


class MlflowMissing(Exception):
    """MLflow's client cannot be imported (the [mlflow] extra is not installed)."""


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export-run", help="write a run to MLflow (a tracking folder or server)",
                              description="Write the run as an MLflow run: the config as params, every step's and "
                                          "epoch's figures and each replica's as metrics, tags, the evaluation, "
                                          "the exports and the model as artifacts. Needs the [mlflow] extra.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder or a run bundle (replica-studio bundle)")
    p.add_argument("--mlflow", required=True, metavar="TRACKING_URI_OR_DIR",
                   help="an MLflow tracking folder (file store, created if missing) or URI (file://, http://, ...)")
    p.add_argument("--experiment", default=DEFAULT_EXPERIMENT, help=f"the experiment (default: {DEFAULT_EXPERIMENT})")
    p.add_argument("--json", action="store_true",
                   help='print {"type": "mlflow_export", "run_id": ..., "action": created|replaced|unchanged, ...}')
    p.set_defaults(handler=_export_run)


def tracking_uri(target: str) -> str:
    """A folder as a file:// URI (created, and checked writable: MLflow's own error there is a
    traceback deep in its store); a URI as it is."""
    if "://" in target or target in ("databricks",) or target.startswith("databricks://"):
        return target
    folder = Path(target).expanduser().absolute()
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"{folder}: not a folder (give an MLflow tracking folder or URI)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create the tracking folder {folder}: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ExportError(f"cannot write to the tracking folder {folder}: permission denied")
    return folder.as_uri()


def _export_run(args: argparse.Namespace) -> int:
    try:
        with contextlib.ExitStack() as stack:  # a bundle: checked whole, read from a temporary copy
            record = read_mlflow_record(run_folder(args.run_dir, stack))
            uri = tracking_uri(args.mlflow)
            answer = export(record, uri, args.experiment)
    except MlflowMissing:
        print(f"replica-studio export-run: {INSTALL_HINT}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    except (OSError, ValueError) as exc:
        print(f"replica-studio export-run: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(answers.encode(answers.MlflowExport(type=answers.MlflowExport.TYPE, **answer))), flush=True)
    else:
        print(f"{record.name}: {answer['action']} MLflow run {answer['run_id']} in experiment "
              f"{args.experiment!r} at {uri} ({answer['metrics']} metric values)", flush=True)
    return EXIT_OK


def export(record: MlflowRecord, uri: str, experiment: str) -> dict[str, Any]:
    """Write ``record`` to the store at ``uri``; what was done. ExportError (one line) when
    MLflow refuses; MlflowMissing without MLflow."""
    if uri.startswith("file:"):
        # MLflow 3.7+ refuses its file store unless asked (it prefers a database); a folder is
        # what this command is for, so it is asked.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    try:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise MlflowMissing(str(exc)) from None

    try:
        return _write(MlflowClient(tracking_uri=uri), record, experiment)
    except MlflowException as exc:
        raise ExportError(f"MLflow at {uri}: {_first_line(exc.message)}") from None
    except Exception as exc:  # a server's connection errors come from requests, urllib3, ...
        if isinstance(exc, OSError):
            raise
        raise ExportError(f"MLflow at {uri}: {type(exc).__name__}: {_first_line(str(exc))}") from None


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or ["(no message)"])[0]


def _write(client: Any, record: MlflowRecord, experiment_name: str) -> dict[str, Any]:
    from mlflow.entities import Metric, Param, ViewType

    experiment = client.get_experiment_by_name(experiment_name)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(experiment_name)
    identity = record.identity.replace("'", "\\'")
    earlier = client.search_runs([experiment_id], filter_string=f"tags.`{IDENTITY_TAG}` = '{identity}'",
                                 run_view_type=ViewType.ACTIVE_ONLY)
    counts = {"metrics": len(record.metrics), "params": len(record.params), "artifacts": len(record.artifacts)}
    base = {"experiment_id": experiment_id, "tracking_uri": client.tracking_uri, **counts}
    if any(r.data.tags.get(FINGERPRINT_TAG) == record.fingerprint for r in earlier):
        kept = next(r for r in earlier if r.data.tags.get(FINGERPRINT_TAG) == record.fingerprint)
        for other in earlier:  # an interrupted export's leftover beside the current one
            if other.info.run_id != kept.info.run_id:
                client.delete_run(other.info.run_id)
        return {"run_id": kept.info.run_id, "action": "unchanged", **base}
    for old in earlier:
        client.delete_run(old.info.run_id)
    run = client.create_run(experiment_id, start_time=record.start_ms, run_name=record.name,
                            tags={k: v for k, v in record.tags.items() if k != FINGERPRINT_TAG})
    run_id = run.info.run_id
    params = [Param(k, v) for k, v in record.params.items()]
    for i in range(0, len(params), PARAMS_PER_BATCH):
        client.log_batch(run_id, params=params[i:i + PARAMS_PER_BATCH])
    metrics = [Metric(key, value, timestamp, step) for key, value, timestamp, step in record.metrics]
    for i in range(0, len(metrics), METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=metrics[i:i + METRICS_PER_BATCH])
    for path, folder in record.artifacts:
        if path.is_dir():
            client.log_artifacts(run_id, str(path), f"{folder}/{path.name}" if folder else path.name)
        else:
            client.log_artifact(run_id, str(path), folder)
    # The fingerprint last: a run whose export was cut short never reads as current (it is replaced).
    client.set_tag(run_id, FINGERPRINT_TAG, record.fingerprint)
    if record.status != "RUNNING":
        client.set_terminated(run_id, record.status, end_time=record.end_ms)
    return {"run_id": run_id, "action": "replaced" if earlier else "created", **base}
