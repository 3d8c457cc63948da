"""Medians over repeated ``replica-studio scaling --options`` reports (docs/benchmarks.md,
"Communication options"): one burst per option and round is noisy on shared cores, so the
command is run several times and each row's figures are the median over the rounds, with the
range beside them; the speed against the baseline is the median of each round's own ratio.

    for r in 1 2 3; do replica-studio scaling CONFIG --strategies mirrored,multi_worker_mirrored \\
        --max-replicas 2 --options -o out-$r; done
    python benchmarks/scaling_medians.py out-*/scaling.json [--markdown]
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def _median(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    return f"{statistics.median(values):,.0f} [{min(values):,.0f}-{max(values):,.0f}]"


def _ratio(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    return f"{statistics.median(values):.2f}x [{min(values):.2f}-{max(values):.2f}]"


def _delta(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "n/c"
    return f"{statistics.median(values):+.5f} [{min(values):+.5f}, {max(values):+.5f}]"


def table(reports: list[dict], markdown: bool) -> list[str]:
    labels = list(dict.fromkeys(r["label"] for data in reports for r in data.get("options") or []))
    head = ("option", "examples/s, median [range]", "vs baseline", "mean loss", "loss - baseline")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] if markdown else [
        f"{head[0]:62s} {head[1]:>26s} {head[2]:>20s} {head[3]:>9s}  {head[4]}"]
    for label in labels:
        rows = [r for data in reports for r in data.get("options") or [] if r["label"] == label and not r["error"]]
        cells = (label, _median([r["examples_per_sec"] for r in rows]), _ratio([r["speed_vs_baseline"] for r in rows]),
                 f"{statistics.median([r['loss'] for r in rows]):.4f}" if rows else "–",
                 _delta([r["loss_vs_baseline"] for r in rows]))
        lines.append("| " + " | ".join(cells) + " |" if markdown else
                     f"{cells[0]:62s} {cells[1]:>26s} {cells[2]:>20s} {cells[3]:>9s}  {cells[4]}")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("reports", nargs="+", help="scaling.json files of the same command, one per round")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    reports = [json.loads(Path(path).read_text(encoding="utf-8")) for path in args.reports]
    print("\n".join(table(reports, args.markdown)))
    strategy_rows = list(dict.fromkeys(r["label"] for data in reports for r in data["rows"]))
    for label in strategy_rows:
        rows = [r for data in reports for r in data["rows"] if r["label"] == label and not r["error"]]
        print(f"{label}: {_median([r['examples_per_sec'] for r in rows])} examples/s")


if __name__ == "__main__":
    main()
