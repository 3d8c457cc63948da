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


# The measured process is forked by this small wrapper, not by the benchmark: on Linux a child's
# ``ru_maxrss`` starts from the RSS of the process it was forked from (exec keeps the larger of the
# old image's peak and the new one's), so a child of a 300 MB benchmark reports at least 300 MB
# whatever it used itself. ``python -I -S`` importing only os, sys and time is about 10 MB, below
# any process measured here. The wrapper's last stderr line: the mark, wall seconds from fork to
# exit and the child's peak RSS in KiB (Linux's unit).
_PEAK_MARK = "PEAK-RSS-OF-CHILD"
_PEAK_WRAPPER = f"""
import os, sys, time
started = time.monotonic()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
sys.stderr.write("\\n{_PEAK_MARK} %.6f %d\\n" % (time.monotonic() - started, usage.ru_maxrss))
sys.stderr.flush()
os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def peak_run(command: list[str], environment: dict[str, str], timeout: float = 3600,
             cwd: str | None = None) -> tuple[float, int, int, bytes]:
    """(wall seconds, peak RSS bytes of that process alone, stdout bytes, its stderr) of
    ``command``, run by the small wrapper above whose only child it is. Stdout is counted, not kept."""
    import tempfile

    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen([PYTHON, "-I", "-S", "-c", _PEAK_WRAPPER, *command], stdout=subprocess.PIPE,
                                stderr=errors, stdin=subprocess.DEVNULL, env=environment, cwd=cwd or str(ROOT))
        out = 0
        assert proc.stdout is not None
        while chunk := proc.stdout.read(1 << 20):
            out += len(chunk)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        errors.seek(0)
        err = errors.read()
    rest, _, last = err.rstrip().rpartition(b"\n")
    words = last.split()
    if proc.returncode != 0 or len(words) != 3 or words[0] != _PEAK_MARK.encode():
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}): {err[-3000:]!r}")
    return float(words[1]), int(words[2]) * 1024, out, rest


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
