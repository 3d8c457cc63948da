"""``replica-studio devices [--json]``: the GPUs, the CPU and the logical devices TensorFlow sees,
with each NVIDIA GPU's NVML figures where a driver answers."""
from __future__ import annotations

import argparse
import json

from gui_app.engine.commands.reporting import one_line_errors
from gui_app.engine.run.exits import EXIT_OK

COMMANDS = ("devices",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("devices", help="list GPUs, the CPU and the logical devices")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--cpu-devices", type=int, default=1, help="split the CPU into N logical devices first")
    p.add_argument("--check", action="store_true",
                   help="exercise every GPU path (strategies, NCCL, float16 all-reduce, mixed precision, a 2-worker "
                        "cluster, NVML, export parity) in a few minutes; without a GPU, says so and exits 0")
    p.add_argument("--check-json", default="gpu_check.json", metavar="FILE",
                   help="with --check: where the results go as JSON (default: gpu_check.json here)")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(handler=one_line_errors(_devices))


def _devices(args) -> int:
    if args.check:
        from pathlib import Path

        from gui_app.engine.commands.devices_check import run_checks

        return run_checks(Path(args.check_json))
    from gui_app.core.config import RuntimeConfig
    from gui_app.engine.training import devices

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
