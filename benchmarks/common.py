"""What every benchmark shares: interleaved whole-process runs, medians with spread, and
figures checked against their targets.

A figure is a dict ``{"name", "value", "target", "better": "higher"|"lower", "unit",
"spread": [min, max], "samples": [...], "command"}``; ``passed(figure)`` says whether it meets
its target. Ratios are computed per interleaved pair (A B, A B, ...) and the median of the
pairs is the figure: on a shared machine, load that hits one run of a pair hits its partner
too, and a lone absolute time means little.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def env(root: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of a benchmarked process: ``root``'s gui_app first on the path."""
    out = dict(os.environ, PYTHONPATH=str(root or ROOT), TF_CPP_MIN_LOG_LEVEL="2", PYTHONDONTWRITEBYTECODE="1")
    out.setdefault("QT_QPA_PLATFORM", "offscreen")
    out.update(extra)
    return out


def timed(command: list[str], environment: dict[str, str], timeout: float = 1800) -> tuple[float, str]:
    """Wall seconds of one whole process and its stdout; raises with its stderr if it fails."""
    started = time.perf_counter()
    # cwd: ``python -m`` puts the working directory first on sys.path, before PYTHONPATH.
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=timeout,
                          stdin=subprocess.DEVNULL, cwd=environment.get("PYTHONPATH", str(ROOT)).split(os.pathsep)[0])
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-3000:]}")
    return seconds, done.stdout


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def figure(name: str, samples: list[float], target: float | None, better: str = "higher", unit: str = "x",
           command: str = "", **detail) -> dict:
    s = spread(samples)
    return {"name": name, "value": s["median"], "target": target, "better": better, "unit": unit,
            "spread": [s["min"], s["max"]], "samples": samples, "command": command, **detail}


def passed(f: dict) -> bool:
    if f.get("target") is None:
        return True
    return f["value"] >= f["target"] if f["better"] == "higher" else f["value"] <= f["target"]


def show(figures: list[dict], stream=sys.stdout) -> None:
    """One line per figure: value (median), spread, target, verdict."""
    for f in figures:
        if f.get("target") is None:
            verdict, target = "info", ""
        else:
            verdict = "ok" if passed(f) else "MISSED"
            target = f"{'>=' if f['better'] == 'higher' else '<='} {f['target']:g}"
        lo, hi = f["spread"]
        print(f"  {f['name']:<62} {f['value']:9.3f} {f['unit']:<5} [{lo:.3f}-{hi:.3f}, n={len(f['samples'])}]"
              f"  target {target:<9} {verdict}", file=stream, flush=True)


def finish(figures: list[dict], json_out: str | None) -> int:
    """Write the figures as JSON (if asked) and return the exit code: 1 when a target is missed."""
    if json_out:
        Path(json_out).write_text(json.dumps({"time": time.strftime("%Y-%m-%d %H:%M:%S"), "figures": figures},
                                             indent=1), encoding="utf-8")
    return 0 if all(passed(f) for f in figures) else 1
