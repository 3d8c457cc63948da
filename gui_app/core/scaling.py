"""The scaling report: how training speed grows with replicas and workers, from short timed
bursts of real runs (``replica-studio scaling``, Tools -> Scaling benchmark).

Qt-free and TensorFlow-free: the engine's ``scaling`` command measures, this module turns the
measured event streams into figures (examples/s, speed-up against the one-replica run and the
ideal line, scaling efficiency, where each step's time goes) and a recommendation, and draws
the chart as SVG, so the window and the command line show the same report.

Where a step's time goes, from the ``step`` events (``Step.time_split``): *compute* is the
slowest replica's forward and backward pass (``replicas[].step_time``: the all-reduce waits for
it), *input* the time the replicas waited for data (``input_wait``, when the engine reports it),
and the rest of the wall time of the step (``step_time``) is the all-reduce, the optimizer and
the host's own work.

``--options`` adds communication variants of the multi-replica configuration (float16
all-reduce, pack size, ring, gradient accumulation): core/scaling_options.py fills the report's
``options`` rows, each with its speed and its loss against a baseline burst of the same seed.
"""
from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from typing import Any

from gui_app.core.bottleneck import bottleneck
from gui_app.core.events import Event, Step
from gui_app.core.metrics import mean_or_none

REPORT_VERSION = 2  # 2: the options rows and every row's mean training loss
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "parameter_server")  # what can be timed
# What is timed unless asked otherwise, by the window (the boxes ticked when it opens) and the command
# line (``--strategies``) alike, so both report the same rows against the same baseline: one process
# per burst; the cluster strategies start several processes each and take minutes more.
DEFAULT_STRATEGIES = ("one_device", "mirrored")


@dataclass(frozen=True)
class Candidate:
    label: str  # "mirrored, 2 replicas"
    strategy: dict[str, Any]  # the run config's strategy section
    runtime: dict[str, Any]  # the run config's runtime section
    replicas: int  # replicas in all (workers x replicas per worker)
    training: dict[str, Any] = field(default_factory=dict)  # updates to the run config's training section
    option: str | None = None  # a communication option (scaling_options.py); None for a strategy row
    group: str | None = None  # the configuration an option varies, e.g. "mirrored, 2 replicas"


def candidates(config: dict[str, Any], max_replicas: int, strategies: tuple[str, ...],
               gpus: int = 0) -> list[Candidate]:
    """The configurations to time for ``config``'s dataset, model and global batch. On a machine
    without GPUs, N replicas are N logical CPU devices (they share the cores: the report says so)."""
    kind = "GPU" if gpus else "CPU"
    top = min(max_replicas, gpus) if gpus else max_replicas
    runtime = dict(config.get("runtime") or {})
    out: list[Candidate] = []
    for name in strategies:
        if name == "default":
            out.append(Candidate("default", {"name": "default"}, {**runtime, "cpu_devices": 1}, 1))
        elif name == "one_device":
            out.append(Candidate("one_device", {"name": "one_device", "device": f"{kind}:0"},
                                 {**runtime, "cpu_devices": 1}, 1))
        elif name == "mirrored":
            for n in range(1, top + 1):
                out.append(Candidate(f"mirrored, {n} replica{'s' if n > 1 else ''}",
                                     {"name": "mirrored", "devices": [f"{kind}:{i}" for i in range(n)]},
                                     {**runtime, "cpu_devices": 1 if gpus else n}, n))
        elif name == "multi_worker_mirrored":
            for n in range(1, max_replicas + 1):
                out.append(Candidate(f"multi-worker, {n} worker{'s' if n > 1 else ''}",
                                     {"name": "multi_worker_mirrored", "workers": n}, {**runtime, "cpu_devices": 1}, n))
        elif name == "parameter_server":
            workers = max(2, max_replicas)
            out.append(Candidate(f"parameter servers, {workers} workers + 1 ps",
                                 {"name": "parameter_server", "workers": workers, "ps": 1},
                                 {**runtime, "cpu_devices": 1}, workers))
        else:
            raise ValueError(f"--strategies: unknown strategy {name!r}")
    return out


@dataclass
class Burst:
    """What one timed burst measured; ``error`` says why it could not run."""

    candidate: Candidate
    examples_per_sec: float | None = None
    steps: int = 0
    compute_s: float | None = None  # per step
    input_s: float | None = None
    other_s: float | None = None  # all-reduce, optimizer, host
    eval_examples_per_sec: float | None = None
    loss: float | None = None  # mean training loss of the timed steps
    error: str | None = None
    devices: list[str] = field(default_factory=list)


def burst_figures(events: list[Event], warmup_steps: int, last_step: int | None = None) -> dict[str, Any]:
    """Examples/s, the per-step time split and the mean training loss of the steps after
    ``warmup_steps`` (tracing and the first step groups excluded) up to ``last_step`` (a burst
    is stopped between step groups, so it may run a few more: every burst's loss is then the
    mean over the same steps), from one process's events."""
    steps = [e for e in events if isinstance(e, Step)]
    timed = [e for e in steps if e.step > warmup_steps and (last_step is None or e.step <= last_step)]
    before = [e for e in steps if e.step <= warmup_steps]
    if not timed or not before:
        raise ValueError(f"the burst ended after {len(steps)} steps, before its timed part")
    # The steps' own wall time (step groups), so epoch-end validation and checkpoints between
    # them do not count as training time.
    seconds = sum(e.step_time or 0.0 for e in timed)
    examples = sum(r.examples for e in timed for r in e.replicas)
    splits = [s for s in (e.time_split() for e in timed) if s is not None]
    compute_s, other = mean_or_none([s[0] for s in splits]), mean_or_none([s[2] for s in splits])
    input_s = mean_or_none([e.input_wait for e in timed if e.input_wait is not None])
    devices = [r.device or "" for r in timed[-1].replicas]
    losses = [e.loss for e in timed if e.loss is not None]
    return {"examples_per_sec": examples / seconds if seconds > 0 else None, "steps": len(timed),
            "compute_s": compute_s, "input_s": input_s, "other_s": other, "devices": devices,
            "loss": mean_or_none(losses)}


def time_split(b: Burst) -> dict[str, float] | None:
    """Compute, input and the rest as shares of the burst's step."""
    total = sum(v for v in (b.compute_s, b.input_s, b.other_s) if v) or None
    if total is None:
        return None
    return {"compute": (b.compute_s or 0) / total, "input": (b.input_s or 0) / total, "other": (b.other_s or 0) / total}


def report(bursts: list[Burst], on_gpus: bool) -> dict[str, Any]:
    """The report as JSON-ready data: one row per strategy burst with speed-up and efficiency
    against the fastest one-replica burst (its label is the report's ``baseline``), and a
    recommendation. Option bursts are left to :func:`gui_app.core.scaling_options.report`, which
    calls this for the rest."""
    bursts = [b for b in bursts if b.candidate.option is None]
    singles = [b for b in bursts if b.examples_per_sec and b.candidate.replicas == 1]
    baseline = max(singles, key=lambda b: b.examples_per_sec or 0.0) if singles else None
    base = baseline.examples_per_sec if baseline else None
    rows = []
    for b in bursts:
        speedup = b.examples_per_sec / base if base and b.examples_per_sec else None
        rows.append({
            "label": b.candidate.label, "strategy": b.candidate.strategy, "replicas": b.candidate.replicas,
            "examples_per_sec": b.examples_per_sec, "eval_examples_per_sec": b.eval_examples_per_sec,
            "speedup": speedup, "ideal": float(b.candidate.replicas) if base else None,
            "efficiency": speedup / b.candidate.replicas if speedup else None, "steps": b.steps,
            "time_split": time_split(b), "loss": b.loss, "devices": b.devices, "error": b.error})
    return {"version": REPORT_VERSION, "on_gpus": on_gpus, "rows": rows, "options": [],
            "baseline": baseline.candidate.label if baseline else None,
            "recommendation": recommendation(rows, on_gpus) if rows else ""}


def speedup_title(data: dict[str, Any]) -> str:
    """The speed-up chart's title, naming the row that is 1.00x (reports before it was named: one replica)."""
    return f"Speed-up against {data.get('baseline') or 'one replica'}"


def recommendation(rows: list[dict[str, Any]], on_gpus: bool) -> str:
    measured = [r for r in rows if r["examples_per_sec"]]
    if not measured:
        return "Nothing could be measured: see each row's error."
    best = max(measured, key=lambda r: r["examples_per_sec"])
    text = f"Fastest here: {best['label']} ({best['examples_per_sec']:,.0f} examples/s"
    text += f", {best['speedup']:.2f}x one replica)." if best.get("speedup") else ")."
    split = best.get("time_split") or {}
    advice = bottleneck(split.get("compute", 0), split.get("input", 0), split.get("other", 0), best["replicas"],
                        (best.get("strategy") or {}).get("name"))
    if advice:
        text += f" Where the time goes: {advice}."
    if not on_gpus:
        text += (" These replicas are logical devices on one CPU: they share its cores, so the figures show "
                 "the cost of replication, not the speed-up GPUs would give.")
    return text


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, allow_nan=False, default=lambda v: None)


def to_svg(data: dict[str, Any], width: int = 640, height: int = 400, below: tuple[list[str], int] = ([], 0)) -> str:
    """Speed-up against replicas: measured points and the ideal line, as a standalone SVG;
    ``below``: more SVG parts and the height they take under the chart (the options' bars)."""
    below_parts, extra = below
    rows = [r for r in data["rows"] if r.get("speedup")]
    left, right, top, bottom = 60, 20, 30, 50
    max_x = max([r["replicas"] for r in rows] + [1])
    max_y = max([r["speedup"] for r in rows] + [float(max_x), 1.0])

    def sx(x: float) -> float:  # replicas -> pixels
        return left + (x - 1) / max(max_x - 1, 1) * (width - left - right)

    def sy(y: float) -> float:  # speed-up -> pixels
        return height - bottom - y / max_y * (height - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + extra}" '
             'font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<text x="{left}" y="18" font-size="14">{html.escape(speedup_title(data))}</text>',
             f'<line x1="{left}" y1="{sy(0)}" x2="{width - right}" y2="{sy(0)}" stroke="black"/>',
             f'<line x1="{left}" y1="{sy(0)}" x2="{left}" y2="{top}" stroke="black"/>',
             f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle">replicas</text>',
             f'<line x1="{sx(1)}" y1="{sy(1)}" x2="{sx(max_x)}" y2="{sy(max_x)}" stroke="#999" stroke-dasharray="4"/>',
             f'<text x="{sx(max_x) - 4}" y="{sy(max_x) + 16}" text-anchor="end" fill="#777">ideal</text>']
    for x in range(1, max_x + 1):
        parts.append(f'<text x="{sx(x)}" y="{sy(0) + 16}" text-anchor="middle">{x}</text>')
    for i in range(int(math.ceil(max_y)) + 1):
        parts.append(f'<text x="{left - 8}" y="{sy(i) + 4}" text-anchor="end">{i}</text>')
    colours = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2")
    for n, family in enumerate(sorted({r["strategy"]["name"] for r in rows})):
        points = sorted((r["replicas"], r["speedup"]) for r in rows if r["strategy"]["name"] == family)
        colour = colours[n % len(colours)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{colour}"/>' for x, y in points]
        parts.append(f'<text x="{left + 10}" y="{top + 16 * (n + 1)}" fill="{colour}">{family}</text>')
    parts += below_parts
    parts.append("</svg>")
    return "\n".join(parts)
