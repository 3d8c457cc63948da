"""The engine's command line: ``replica-studio train|resume|evaluate|inspect|devices``.

Exit codes: 0 completed or stopped, 1 failed in training, 2 bad config or input. Errors are
one line on stderr (and an ``error`` event); ``--debug`` adds the traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from gui_app import __version__
from gui_app.core.config import ConfigError, RunConfig

from gui_app.engine import cluster_cli, export_command, predict_command, prepare, scaling_command
from gui_app.engine.exits import EXIT_BAD_INPUT, EXIT_OK

SUBCOMMANDS = ("train", "resume", "evaluate", "inspect", "devices", "scaling", export_command.COMMAND,
               predict_command.COMMAND) + prepare.COMMANDS + cluster_cli.COMMANDS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replica-studio", description=(
        "Distributed TensorFlow training and evaluation. Without a command, opens the desktop app."))
    parser.add_argument("--version", action="version", version=f"replica-studio {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def run_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--events", choices=("jsonl", "text", "none"), default="text",
                       help="stdout format: JSON lines (only events on stdout), readable text, or nothing")
        p.add_argument("--control", choices=("stdin", "none"), default="none",
                       help="read stop/pause/resume/checkpoint lines from stdin (used by the desktop app)")
        p.add_argument("--debug", action="store_true", help="print tracebacks")

    p = sub.add_parser("train", help="train a model from a run configuration (JSON)")
    p.add_argument("config", help="run configuration file (JSON)")
    p.add_argument("--allow-public-hosts", action="store_true",
                   help="allow strategy.cluster hosts that are not loopback or private (gRPC has no authentication)")
    p.add_argument("--runs-dir", help="folder for run directories (default: the user data folder)")
    run_options(p)
    p = sub.add_parser("resume", help="continue a stopped, failed or killed run from its last checkpoint")
    p.add_argument("run_dir")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="change a training setting that keeps the model, e.g. training.learning_rate=0.0005 "
                        "or training.global_batch_size=32 (repeatable)")
    run_options(p)
    p = sub.add_parser("evaluate", help="evaluate a run's model on its test set again")
    p.add_argument("run_dir")
    run_options(p)
    p = sub.add_parser("inspect", help="describe the dataset and model of a configuration")
    p.add_argument("config")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--samples", help="write sample images (npz with x, y) here")
    p.add_argument("--debug", action="store_true")
    p = sub.add_parser("devices", help="list GPUs, the CPU and the logical devices")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--cpu-devices", type=int, default=1, help="split the CPU into N logical devices first")
    p.add_argument("--debug", action="store_true")
    export_command.add_command(sub)  # export, predict and scaling live in their own modules
    predict_command.add_command(sub)
    scaling_command.add_command(sub)
    prepare.add_commands(sub)  # prepare (dataset -> TFRecord shards) too
    cluster_cli.add_commands(sub)  # worker and cluster-script
    return parser


def _quiet_tensorflow(debug: bool) -> None:
    import os

    if debug:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        return
    from gui_app.engine.quiet import silence_tensorflow_logs

    silence_tensorflow_logs()  # bad input must read as one line, not eight of TensorFlow's


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    _quiet_tensorflow(bool(getattr(args, "debug", False)))
    handler = getattr(args, "handler", None)
    if handler is not None:  # plugin commands bring their own
        return handler(args)
    if args.command in ("train", "resume", "evaluate"):
        from gui_app.engine.session import run_command

        return run_command(args)
    try:
        if args.command == "devices":
            return _devices(args)
        return _inspect(args)
    except (ConfigError, ValueError, OSError) as exc:
        if args.debug:
            traceback.print_exc()
        print(f"replica-studio {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _devices(args) -> int:
    from gui_app.core.training import devices
    from gui_app.core.config import RuntimeConfig

    devices.configure_runtime(RuntimeConfig(cpu_devices=args.cpu_devices))
    from gui_app.core.gpu_monitor import read_gpus

    info = devices.detect()
    samples = read_gpus()  # NVML: utilisation, memory, temperature, power (None without a driver)
    info["nvml"] = None if samples is None else [s.to_dict() for s in samples]
    text = devices.format_devices(info)
    for s in samples or []:
        text += (f"\n  NVML {s.index} {s.name}: {s.utilization if s.utilization is not None else '?'} % busy, "
                 f"{(s.memory_used or 0) / 2**30:.1f}/{(s.memory_total or 0) / 2**30:.1f} GiB, "
                 f"{s.temperature if s.temperature is not None else '?'} °C, "
                 f"{s.power if s.power is not None else '?'} W")
    print(json.dumps(info) if args.json else text)
    return EXIT_OK


def _inspect(args) -> int:
    import numpy as np

    from gui_app.core.datasets.loading import inspect_dataset
    from gui_app.core.training.models import ModelError, build_model, describe

    config = RunConfig.load(args.config)
    dataset = inspect_dataset(config.dataset)  # a bounded sample when the set would stream
    try:
        model = build_model(config.model, dataset.input_shape, dataset.num_classes)
    except ModelError as exc:
        raise ConfigError(str(exc)) from None
    summary = dataset.summary()
    summary["warnings"] = list(dataset.warnings)
    out = {"dataset": summary, "model": describe(model)}
    if args.samples:
        per_class = max(1, min(8, 64 // dataset.num_classes))
        picks = np.concatenate([np.flatnonzero(dataset.y_train == c)[:per_class] for c in range(dataset.num_classes)])
        Path(args.samples).parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(args.samples, x=dataset.x_train[picks], y=dataset.y_train[picks])
    if args.json:
        print(json.dumps(out))
    else:
        d, m = out["dataset"], out["model"]
        print(f"{d['name']}: {d['train_examples']} train / {d['test_examples']} test, input "
              f"{'x'.join(map(str, d['input_shape']))}, {len(d['class_names'])} classes")
        print(f"{m['name']}: {m['parameters']:,} parameters in {len(m['layers'])} layers")
    return EXIT_OK
