"""``replica-studio export`` and ``replica-studio predict``.

    replica-studio export RUN_DIR --format tflite-int8 --output digits-int8.tflite [--check 256]
    replica-studio predict digits-int8.tflite seven.png two.jpg [--top 5] [--json]

``export`` prints where the file went, its size and the parity figures on stdout, progress on
stderr. Exit codes: 0 written and checked, 1 the check failed (nothing written unless
--keep-failed) or a converter failed, 2 bad input (one line on stderr), 130 interrupted.

The main command line registers these with :func:`add_commands`; the parsed arguments carry
``handler`` (this module's :func:`run`) and ``export_command``. Errors are one line on stderr,
``replica-studio export: <problem>``, like the engine's; ``--debug`` adds the traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import traceback

from gui_app.core.export import (DEFAULT_CHECK, FORMATS, ConversionError, ExportCancelled, ExportError,
                                 export_run, format_size, load_predictor)

COMMANDS = ("export", "predict")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    export = subparsers.add_parser(
        "export", help="export a trained run and check the file against the trained model",
        description="Write the trained model of RUN_DIR in one format, load the file back in its own runtime, "
                    "compare it with the trained model on N test images and write a model card "
                    "(<output>.json) beside it.")
    export.add_argument("run_dir", metavar="RUN_DIR", help="a finished run folder (with model.keras)")
    export.add_argument("--format", required=True, choices=list(FORMATS), dest="export_format")
    export.add_argument("--output", "-o", required=True, metavar="PATH",
                        help="the file to write (a folder for savedmodel)")
    export.add_argument("--check", type=int, default=DEFAULT_CHECK, metavar="N",
                        help=f"test images for the parity check (default {DEFAULT_CHECK}; 0 skips it)")
    export.add_argument("--keep-failed", action="store_true",
                        help="keep the file even when it fails its parity check")
    export.add_argument("--json", action="store_true", help="print the result as one JSON object")
    export.add_argument("--debug", action="store_true", help="print tracebacks")
    export.set_defaults(export_command="export", handler=run)

    predict = subparsers.add_parser(
        "predict", help="classify image files with a run or an exported model",
        description="Classify PNG/JPEG/BMP files with a run folder, .keras file, SavedModel folder, .tflite or "
                    ".onnx file; class names and preprocessing come from the model card beside it.")
    predict.add_argument("model", metavar="MODEL_OR_RUN")
    predict.add_argument("images", nargs="+", metavar="IMAGE")
    predict.add_argument("--top", type=int, default=5, metavar="K", help="classes to show per image (default 5)")
    predict.add_argument("--json", action="store_true", help="print one JSON object")
    predict.add_argument("--debug", action="store_true", help="print tracebacks")
    predict.set_defaults(export_command="predict", handler=run)


def run(args: argparse.Namespace) -> int:
    """Run a command added by :func:`add_commands`; returns the exit code."""
    previous = _stop_on_sigterm()
    command = args.export_command
    try:
        return _export(args) if command == "export" else _predict(args)
    except ExportError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"replica-studio {command}: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, ConversionError) else 2
    except (ExportCancelled, KeyboardInterrupt):
        print(f"replica-studio {command}: interrupted; nothing was written", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - our bug or a broken install: still one line
        if args.debug:
            traceback.print_exc()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"replica-studio {command}: internal error: {type(exc).__name__}: {first} "
              "(run again with --debug for the traceback)", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _stop_on_sigterm():
    """SIGTERM unwinds like Ctrl+C, so the temporary files of an export are removed.
    Returns the handler to restore (None off the main thread, where signals cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, signal.default_int_handler)


def _export(args: argparse.Namespace) -> int:
    def progress(fraction: float, message: str) -> None:
        print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)

    result = export_run(args.run_dir, args.export_format, args.output, check=args.check, progress=progress,
                        keep_failed=args.keep_failed)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        state = "written" if result.written else "NOT written"
        print(f"{result.path}: {result.format}, {format_size(result.size_bytes)}, {state} in {result.seconds:.1f} s")
        if result.written:
            print(f"model card: {result.card_path}")
        print(f"parity: {result.parity.summary()}" if result.parity else "parity: not checked (--check 0)")
    if not result.passed:
        hint = "" if result.written else "; nothing was written (--keep-failed keeps it)"
        print(f"replica-studio export: {result.path.name} failed its parity check ({result.parity.criterion}){hint}",
              file=sys.stderr)
        return 1
    return 0


def _predict(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise ExportError(f"--top: must be at least 1; got {args.top}")
    missing = [path for path in args.images if not os.path.isfile(path)]
    if missing:  # before the model loads: a typo should not cost a TensorFlow start
        raise ExportError(f"{missing[0]}: no such image file")
    predictor = load_predictor(args.model)
    predictions = predictor.predict_files(args.images)
    if args.json:
        print(json.dumps({"model": str(predictor.source), "kind": predictor.kind,
                          "class_names": predictor.class_names, "warnings": predictor.warnings,
                          "predictions": [p.to_dict(args.top) for p in predictions]}))
        return 0
    for warning in predictor.warnings:
        print(f"replica-studio predict: warning: {warning}", file=sys.stderr)
    width = max(len(name) for name in predictor.class_names)
    for prediction in predictions:
        print(prediction.source)
        for index, name, probability in prediction.top(args.top):
            print(f"  {name:<{width}}  {probability:7.2%}")
    return 0
