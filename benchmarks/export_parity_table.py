"""Export one run to every format through the real command line and print the parity table
of docs/export.md:

    python benchmarks/export_parity_table.py RUN_DIR OUT_DIR [--check 256]

Each export is its own ``replica-studio export ... --json`` process, as a user would run it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gui_app.engine.export import FORMATS, default_file_name, format_size
from gui_app.identity import app_command, app_env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--check", type=int, default=256)
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    print("| format | file | size | max abs diff | top-1 agreement | accuracy (trained model) | check | time |")
    print("|---|---|---|---|---|---|---|---|")
    failed = 0
    for name, fmt in FORMATS.items():
        output = args.out_dir / default_file_name(fmt, "digits")
        done = subprocess.run(app_command("export", str(args.run_dir), "--format", name, "--output", str(output),
                                             "--check", str(args.check), "--json"),
                              capture_output=True, text=True, env=app_env())
        if not done.stdout.strip():
            print(f"| {name} | export failed: {done.stderr.strip().splitlines()[-1]} |||||||")
            failed += 1
            continue
        result = json.loads(done.stdout)
        p = result["parity"]
        failed += not result["passed"]
        print(f"| {name} | {output.name} | {format_size(result['size_bytes'])} | {p['max_abs_diff']:.1e} | "
              f"{p['top1_agreement']:.2%} | {p['accuracy']:.2%} ({p['reference_accuracy']:.2%}) | "
              f"{'pass' if p['passed'] else 'FAIL'} ({p['criterion']}) | {result['seconds']:.1f} s |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
