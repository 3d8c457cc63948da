"""``replica-studio export``: write a trained run in one format and check it.

    replica-studio export RUN_DIR --format tflite-int8 --output digits-int8.tflite [--check 256] [--json]

A run that stopped before its end has no model.keras: its newest checkpoint is exported (the
model card's ``weights`` says so). Without ``--json`` it prints where the file went, its size
and the parity figures on stdout, progress on stderr. With ``--json`` stdout carries JSON lines
only (what the window reads): ``progress`` events (gui_app.core.events.Progress: ``stage``
"export", ``fraction``, ``message``) while it works, then one ``{"type": "export_result", ...}``
(:meth:`ExportResult.to_dict`). Errors are one line on stderr either way. Exit codes: 0 written
and checked, 1 the check failed (nothing written unless --keep-failed) or a converter failed,
2 bad input, 130 interrupted (Ctrl+C, SIGTERM: the temporaries are removed, nothing
half-written is left).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.bundle import BundleError
from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.events import Progress, encode
from gui_app.core.formats import DEFAULT_CHECK, FORMATS, ExportError, format_size
from gui_app.core.run_lock import RunInUse, RunLock
from gui_app.engine.commands.bundle import run_folder
from gui_app.engine.commands.reporting import run_reporting_errors
from gui_app.engine.run.exits import EXIT_FAILED, EXIT_OK

COMMAND = "export"
COMMANDS = (COMMAND,)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    export = subparsers.add_parser(
        COMMAND, help="export a trained run and check the file against the trained model",
        description="Write the trained model of RUN_DIR in one format, load the file back in its own runtime, "
                    "compare it with the trained model on N test images and write a model card "
                    "(<output>.json) beside it.")
    export.add_argument("run_dir", metavar="RUN_DIR",
                        help="a run folder: its model.keras, or the last checkpoint of a run that stopped early; "
                             "or a run bundle with its model (replica-studio bundle --with-model)")
    export.add_argument("--format", required=True, choices=list(FORMATS), dest="export_format")
    export.add_argument("--output", "-o", required=True, metavar="PATH",
                        help="the file to write (a folder for savedmodel)")
    export.add_argument("--check", type=int, default=DEFAULT_CHECK, metavar="N",
                        help=f"test images for the parity check (default {DEFAULT_CHECK}; 0 skips it)")
    export.add_argument("--keep-failed", action="store_true",
                        help="keep the file even when it fails its parity check")
    export.add_argument("--json", action="store_true",
                        help="stdout: JSON lines only (progress events, then the export_result)")
    export.add_argument("--debug", action="store_true", help="print tracebacks")
    export.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return run_reporting_errors(COMMAND, _export, args)


def _export(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:  # a run bundle: exported from a temporary copy (its model inside)
        try:
            args.run_dir = str(run_folder(args.run_dir, stack))
        except BundleError as exc:
            raise ExportError(str(exc)) from None
        return _export_run(args)


def _export_run(args: argparse.Namespace) -> int:
    if not args.json:
        return _export_to(args, None)
    stdout = sys.stdout
    sys.stdout = sys.stderr  # a library's stray print() must not break the JSON lines
    try:
        return _export_to(args, stdout)
    finally:
        sys.stdout = stdout


def _export_to(args: argparse.Namespace, json_out) -> int:
    from gui_app.engine.export import export_run  # the exporters: loaded only to export

    def _json_line(value: dict) -> None:
        json_out.write(json.dumps(value) + "\n")
        json_out.flush()

    def progress(fraction: float, message: str) -> None:
        if args.json:
            _json_line(encode(Progress(time=time.time(), stage=COMMAND, fraction=round(float(fraction), 4),
                                       message=message)))
        else:
            print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)

    # One process at a time per run: an export of a run that a resume or an evaluate is writing
    # (or another export) is refused. Not a run folder at all: export_run says so.
    run_dir = Path(args.run_dir).expanduser()
    lock = RunLock(run_dir) if rundir.is_run_dir(run_dir) else contextlib.nullcontext()
    try:
        with lock, tempfile.TemporaryDirectory(prefix="replica-studio-export-") as folder:
            model_file, weights = None, "model.keras: the model at the end of the run"
            if rundir.is_run_dir(run_dir) and not (run_dir / rundir.MODEL_FILE).is_file() \
                    and rundir.has_checkpoint(run_dir):
                progress(0.01, "Restoring the model from the run's last checkpoint")
                model_file, weights = checkpoint_model(run_dir, Path(folder))
            result = export_run(run_dir, args.export_format, args.output, check=args.check, progress=progress,
                                keep_failed=args.keep_failed, model_file=model_file, weights=weights)
    except RunInUse as exc:
        raise ExportError(str(exc)) from None
    if args.json:
        _json_line({"type": "export_result", **result.to_dict()})
    else:
        state = "written" if result.written else "NOT written"
        print(f"{result.path}: {result.format}, {format_size(result.size_bytes)}, {state} in {result.seconds:.1f} s")
        if result.written:
            print(f"model card: {result.card_path}")
        print(f"parity: {result.parity.summary()}" if result.parity else "parity: not checked (--check 0)")
    if model_file is not None and not args.json:
        print(f"exported from {weights}")
    if result.parity is not None and not result.parity.passed:
        hint = "" if result.written else "; nothing was written (--keep-failed keeps it)"
        print(f"replica-studio export: {result.path.name} failed its parity check ({result.parity.criterion}){hint}",
              file=sys.stderr, flush=True)
        return EXIT_FAILED
    return EXIT_OK


def checkpoint_model(run_dir: Path, folder: Path) -> tuple[Path, str]:
    """A run that stopped (or failed) before its end has checkpoints but no model.keras: its
    newest usable checkpoint, restored as the training did (engine/training/context.py) and saved
    as ``folder/model.keras``; with what the model card says it is."""
    from gui_app.engine.run.failures import InputError
    from gui_app.engine.training import context

    try:
        config = RunConfig.load(run_dir / rundir.CONFIG_FILE)
        ctx = context.prepare(context.single_process(config), None, run_dir / context.DATA_DIR)
        state = context.build_model_state(ctx, run_dir)
        if not context.restore_latest(ctx, state, []):
            raise ExportError(f"{run_dir}: the run has no trained model ({rundir.MODEL_FILE}) and no checkpoint")
    except (ConfigError, InputError) as exc:
        raise ExportError(f"{run_dir}: cannot restore its checkpoint: {exc}") from None
    path = folder / rundir.MODEL_FILE
    state.model.save(path)
    total = ctx.total_steps
    return path, f"the checkpoint at step {state.steps_done():,} of {total:,} (the run stopped before its end)"
