"""Communication options in the scaling report (``replica-studio scaling --options``): each
option is a burst of the multi-replica configuration with one setting changed, measured for
its speed *and* its effect on the loss against a baseline burst of the same configuration.

Every burst of a group trains from the same seed and data order (the config's seed, else 1),
so the mean training loss over the same timed steps is comparable between them: a float16
all-reduce that rounds the gradients, or an accumulation that changes BatchNorm's statistics,
shows as a loss difference, and an option that only moves the speed shows none. The one row
that is not comparable step for step is the reference "batch B/M, no accumulation": each of
its steps sees 1/M of the examples (and makes M times more all-reduces per example); it is
there to show what accumulation buys: the small batch's memory at the large batch's
communication. TensorFlow-free, like core/scaling.py.
"""
from __future__ import annotations

import html
from typing import Any

from gui_app.core import scaling
from gui_app.core.scaling import Burst, Candidate, time_split

PACK_BYTES = 64 << 10  # a small pack against TensorFlow's own choice (bytes_per_pack 0: one pack)
MICRO_BATCHES = 4
BASELINE = "baseline"


def option_candidates(config: dict[str, Any], max_replicas: int, strategies: tuple[str, ...],
                      gpus: int = 0) -> list[Candidate]:
    """The option bursts for mirrored on N replicas and multi_worker_mirrored on N workers (N =
    ``max_replicas``, capped by the GPUs on a GPU machine), for those of ``strategies`` asked."""
    kind = "GPU" if gpus else "CPU"
    runtime = dict(config.get("runtime") or {})
    training = dict(config.get("training") or {})
    batch = int(training.get("global_batch_size") or 64)
    seed = training.get("seed")
    seed = 1 if seed is None else seed
    # (label, strategy, runtime, replicas, collective): the configurations the options vary
    groups: list[tuple[str, dict[str, Any], dict[str, Any], int, bool]] = []
    mirrored = min(max_replicas, gpus) if gpus else max_replicas
    if "mirrored" in strategies and mirrored >= 2:
        groups.append((f"mirrored, {mirrored} replicas",
                       {"name": "mirrored", "devices": [f"{kind}:{i}" for i in range(mirrored)]},
                       {**runtime, "cpu_devices": 1 if gpus else mirrored}, mirrored, False))
    if "multi_worker_mirrored" in strategies and max_replicas >= 2:
        groups.append((f"multi-worker, {max_replicas} workers",
                       {"name": "multi_worker_mirrored", "workers": max_replicas},
                       {**runtime, "cpu_devices": 1}, max_replicas, True))
    out = []
    for group, strategy, group_runtime, replicas, collective in groups:
        variants: list[tuple[str, dict, dict]] = [(BASELINE, {}, {}),
                                                  ("all-reduce in float16", {"all_reduce_dtype": "float16"}, {})]
        if collective:  # MirroredStrategy's reductions ignore pack sizes and implementations
            variants += [(f"bytes_per_pack {PACK_BYTES >> 10} KiB", {"bytes_per_pack": PACK_BYTES}, {}),
                         ("communication ring (baseline: auto)", {"communication": "ring"}, {})]
        if batch // replicas >= MICRO_BATCHES:
            variants.append((f"accumulate {MICRO_BATCHES} micro-batches", {},
                             {"accumulation_steps": MICRO_BATCHES}))
        if batch // MICRO_BATCHES >= replicas:
            variants.append((f"batch {batch // MICRO_BATCHES}, no accumulation (reference)", {},
                             {"global_batch_size": batch // MICRO_BATCHES}))
        for option, strategy_change, training_change in variants:
            out.append(Candidate(f"{group}: {option}", {**strategy, **strategy_change}, group_runtime, replicas,
                                 training={"seed": seed, **training_change}, option=option, group=group))
    return out


def report(bursts: list[Burst], on_gpus: bool) -> dict[str, Any]:
    """:func:`scaling.report` of the strategy bursts, with the option rows and their summary."""
    data = scaling.report(bursts, on_gpus)
    data["options"] = option_rows([b for b in bursts if b.candidate.option is not None])
    data["recommendation"] = " ".join(t for t in (data["recommendation"], options_summary(data["options"])) if t)
    return data


def to_svg(data: dict[str, Any], width: int = 640, height: int = 400) -> str:
    """The scaling chart with the options' bars under it."""
    return scaling.to_svg(data, width, height, below=options_svg(data.get("options") or [], width, height))


def option_rows(bursts: list[Burst]) -> list[dict[str, Any]]:
    """One row per option burst: examples/s, speed and loss against its group's baseline."""
    baselines = {b.candidate.group: b for b in bursts if b.candidate.option == BASELINE}
    rows = []
    for b in bursts:
        base = baselines.get(b.candidate.group)
        speed = (b.examples_per_sec / base.examples_per_sec
                 if base and base.examples_per_sec and b.examples_per_sec else None)
        comparable = "global_batch_size" not in b.candidate.training
        delta = (b.loss - base.loss if comparable and base and base.loss is not None and b.loss is not None
                 else None)
        rows.append({
            "label": b.candidate.label, "group": b.candidate.group, "option": b.candidate.option,
            "strategy": b.candidate.strategy, "training": b.candidate.training, "replicas": b.candidate.replicas,
            "examples_per_sec": b.examples_per_sec, "speed_vs_baseline": speed, "loss": b.loss,
            "loss_vs_baseline": delta, "loss_comparable": comparable, "steps": b.steps,
            "time_split": time_split(b), "devices": b.devices, "error": b.error})
    return rows


def options_summary(rows: list[dict[str, Any]]) -> str:
    """One sentence per group: the fastest option against the baseline, with its loss effect."""
    out = []
    for group in dict.fromkeys(r["group"] for r in rows):
        tried = [r for r in rows if r["group"] == group and r["option"] != BASELINE and r["speed_vs_baseline"]
                 and r["loss_comparable"]]
        if not tried:
            continue
        best = max(tried, key=lambda r: r["speed_vs_baseline"])
        loss = "" if best["loss_vs_baseline"] is None else f", training loss {best['loss_vs_baseline']:+.5f}"
        verdict = "faster than" if best["speed_vs_baseline"] > 1 else "no option beat"
        text = (f"Communication options on {group}: {best['option']} ran at {best['speed_vs_baseline']:.2f}x "
                f"the baseline{loss}" if verdict == "faster than" else
                f"Communication options on {group}: {verdict} the baseline (best: {best['option']}, "
                f"{best['speed_vs_baseline']:.2f}x{loss})")
        out.append(text + "; one burst each, so repeat before trusting a few percent.")
    return " ".join(out)


def options_svg(rows: list[dict[str, Any]], width: int, top: int) -> tuple[list[str], int]:
    """SVG parts drawn below ``top``: a bar per option, its speed against the baseline (the
    line at 1x), labelled with the loss effect; and the height they take."""
    if not rows:
        return [], 0
    bar, left, right = 18, 250, 140
    groups = list(dict.fromkeys(r["group"] for r in rows))
    height = 40 + bar * (len(rows) + len(groups)) + 20
    most = max([r["speed_vs_baseline"] or 0 for r in rows] + [1.2])

    def sx(v: float) -> float:
        return left + v / most * (width - left - right)

    parts = [(f'<text x="10" y="{top + 22}" font-size="14">Communication options: speed against the baseline, '
              'loss effect</text>'),
             (f'<line x1="{sx(1):.1f}" y1="{top + 30}" x2="{sx(1):.1f}" y2="{top + height - 16}" stroke="#999" '
              'stroke-dasharray="4"/>')]
    y, group = top + 34, None
    for row in rows:
        if row["group"] != group:  # a heading per configuration; the bars are named by option only
            group = row["group"]
            parts.append(f'<text x="10" y="{y + 12}" font-weight="bold">{html.escape(str(group), quote=False)}</text>')
            y += bar
        name = str(row.get("option") or row["label"])
        name = name if len(name) <= 38 else name[:37] + "…"
        parts.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{html.escape(name, quote=False)}</text>')
        speed = row.get("speed_vs_baseline")
        if not speed:
            error = html.escape((row.get("error") or "–")[:60], quote=False)  # cut before escaping: no half entity
            parts.append(f'<text x="{left + 4}" y="{y + 12}" fill="#c62828">{error}</text>')
            y += bar
            continue
        parts.append(f'<rect x="{left}" y="{y + 2}" width="{sx(speed) - left:.1f}" height="{bar - 5}" fill="#4e79a7"/>')
        delta = row.get("loss_vs_baseline")
        loss = "loss n/c" if not row.get("loss_comparable") else ("" if delta is None else f"loss {delta:+.5f}")
        parts.append(f'<text x="{sx(speed) + 4:.1f}" y="{y + 12}">{speed:.2f}x {loss}</text>')
        y += bar
    return parts, height
