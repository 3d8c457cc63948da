"""Every GPU path of the engine, checked in a few minutes on a machine with NVIDIA GPUs.

    PYTHONPATH=. python benchmarks/gpu_check.py [--json gpu_check.json]

The same as ``replica-studio devices --check`` (gui_app/engine/commands/devices_check.py says what each
check does): one table, the JSON beside it, exit 1 on any failure; without a GPU one line and
exit 0. Nothing names a GPU count: it runs unchanged on one GPU or eight.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="gpu_check.json", help="where the results go (default: gpu_check.json)")
    args = parser.parse_args()
    from gui_app.engine.commands.devices_check import run_checks
    from gui_app.engine.run.quiet import silence_tensorflow_logs

    silence_tensorflow_logs()  # the CUDA stub's lines on a machine without GPUs: the one line is the answer
    return run_checks(Path(args.json))


if __name__ == "__main__":
    sys.exit(main())
