"""Streamed input (issue 10): memory, throughput and ``prepare`` speed, ratios in one run.

    python benchmarks/bench_streaming.py memory     [--budget-mb 128] [--runs 2]
    python benchmarks/bench_streaming.py throughput [--examples 12000] [--epochs 3] [--runs 2]
    python benchmarks/bench_streaming.py prepare    [--examples 20000] [--runs 2]

memory: peak resident memory (ru_maxrss of the engine process) of ``replica-studio train`` on
  a TFRecord set whose decoded size is at least twice ``--budget-mb`` (set through
  ``$REPLICA_STUDIO_MEMORY_BUDGET_MB``, so ``loading: auto`` streams it), against the same
  engine on a tiny set (1,200 examples, in memory), and the large set forced into memory for
  reference. Target: within 0.6 GB.
throughput: examples/s of the steps after the first epoch (tracing and the cache's warming
  pass excluded), in-memory vs streamed with ``cache: memory``, on MNIST- and CIFAR-shaped
  shards written by ``prepare``; runs interleaved A B A B, medians. Also the test accuracy.
  Target: streamed >= 0.9x in memory.
prepare: images/s of ``replica-studio prepare`` on an MNIST-shaped npz (write rate from its
  last progress line, and the whole process). Target >= 2,000 small images/s.

The data is synthetic but learnable (a class template plus noise), so accuracy means
something and nothing is downloaded. Not part of the test suite.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from gui_app.core.events import Eval, RunStarted, Step, decode  # noqa: E402
from gui_app.identity import app_command, app_env  # noqa: E402

SHAPES = {"mnist": (28, 28, 1), "cifar": (32, 32, 3)}
MODELS = {"mnist": "mnist_cnn", "cifar": "cifar_cnn"}


def synthetic_npz(path: Path, n: int, shape: tuple[int, int, int], classes: int = 10, seed: int = 0) -> Path:
    import numpy as np

    rng = np.random.default_rng(seed)
    templates = rng.integers(0, 256, (classes, *shape)).astype(np.float32)
    y = rng.integers(0, classes, n)
    noise = rng.normal(0, 90, (n, *shape)).astype(np.float32)
    x = np.clip(templates[y] * 0.5 + 64 + noise, 0, 255).astype(np.uint8)
    cut = n * 5 // 6
    np.savez(path, x_train=x[:cut], y_train=y[:cut], x_test=x[cut:], y_test=y[cut:])
    return path


def _engine(args: list[str], env: dict | None = None) -> tuple[int, str, int]:
    """Run an engine command in a wrapper that reports the child's peak RSS (KiB)."""
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE); "
               "sys.stdout.buffer.write(r.stdout); "
               "sys.stderr.write('MAXRSS %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
               "sys.exit(r.returncode)")
    proc = subprocess.run([sys.executable, "-c", wrapper, *app_command(*args)], capture_output=True, text=True,
                          env=app_env(env))
    rss = int([line for line in proc.stderr.splitlines() if line.startswith("MAXRSS")][-1].split()[1])
    if proc.returncode != 0:
        raise SystemExit(f"engine failed ({proc.returncode}): {proc.stderr[-1500:]}")
    return proc.returncode, proc.stdout, rss


def _prepare(npz: Path, out: Path, shards: int) -> dict:
    cfg = out.parent / f"{out.name}-src.json"
    cfg.write_text(json.dumps({"dataset": {"name": "npz", "path": str(npz)}}))
    _, stdout, _ = _engine(["prepare", str(cfg), "--output", str(out), "--shards", str(shards), "--json"])
    lines = [json.loads(line) for line in stdout.splitlines()]
    progress = [e for e in lines if e["type"] == "progress"]
    return {**lines[-1], "write_rate": progress[-1]["images_per_sec"] if progress else None}


def _train(tmp: Path, dataset: dict, model: str, epochs: int, batch: int, env: dict | None = None) -> dict:
    cfg = tmp / "cfg.json"
    cfg.write_text(json.dumps({
        "dataset": {"validation": "none", **dataset}, "model": {"name": model},
        "strategy": {"name": "default"},
        "training": {"epochs": epochs, "global_batch_size": batch, "seed": 1, "steps_per_call": 10}}))
    _, stdout, rss = _engine(["train", str(cfg), "--runs-dir", str(tmp / "runs"), "--events", "jsonl"], env)
    events = [decode(json.loads(line)) for line in stdout.splitlines()]
    started = next(e for e in events if isinstance(e, RunStarted))
    every = [e for e in events if isinstance(e, Step)]
    steps = [e for e in every if e.step > started.steps_per_epoch]
    steps = steps or every[10:] or every  # one epoch: all but the first step group
    waits = sum(e.input_wait or 0 for e in steps) / max(sum(e.step_time for e in steps), 1e-9)
    return {"rss_mib": rss / 1024, "examples_per_sec": statistics.median(e.examples_per_sec for e in steps),
            "accuracy": next(e for e in events if isinstance(e, Eval)).accuracy, "input_wait": waits,
            "streamed": bool(started.dataset.get("streamed")),
            "train_examples": started.dataset["train_examples"]}


def bench_memory(args) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-stream-mem-"))
    size = 64  # stored as 32x32 PNGs, trained at 64x64x3: 12 KiB decoded per example
    per_example = size * size * 3
    n = int(2.2 * args.budget_mb * 2**20 / per_example)
    big = _prepare(synthetic_npz(tmp / "big.npz", n, (32, 32, 3)), tmp / "big", 8)
    tiny = _prepare(synthetic_npz(tmp / "tiny.npz", 1200, (32, 32, 3)), tmp / "tiny", 2)
    env = {"REPLICA_STUDIO_MEMORY_BUDGET_MB": str(args.budget_mb)}
    rows = {"big": [], "tiny": [], "big-in-memory": []}
    for _ in range(args.runs):
        for name, prepared in (("big", big), ("tiny", tiny), ("big-in-memory", big))[: 2 if args.quick else 3]:
            loading = "memory" if name == "big-in-memory" else "auto"
            run = _train(tmp, {"name": "tfrecord", "path": prepared["output"], "image_size": [size, size],
                               "loading": loading, "cache": "auto"}, "mlp", 1, 64, env)
            rows[name].append(run)
            print(f"{name}: streamed={run['streamed']} peak RSS {run['rss_mib']:.0f} MiB, test accuracy "
                  f"{run['accuracy']:.4f}, {run['examples_per_sec']:.0f} examples/s", flush=True)
    decoded = n * per_example / 2**20
    b = statistics.median(r["rss_mib"] for r in rows["big"])
    t = statistics.median(r["rss_mib"] for r in rows["tiny"])
    print(f"set: {n} examples, decoded {decoded:.0f} MiB at {size}x{size}x3 = {decoded / args.budget_mb:.1f}x the "
          f"{args.budget_mb} MiB budget; streamed={rows['big'][0]['streamed']}")
    m = statistics.median(r["rss_mib"] for r in rows["big-in-memory"]) if rows["big-in-memory"] else float("nan")
    print(f"peak RSS: large set streamed {b:.0f} MiB, tiny set {t:.0f} MiB, difference {b - t:.0f} MiB "
          f"(target < 614); the large set decoded into memory instead: {m:.0f} MiB")


def bench_throughput(args) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-stream-tp-"))
    for name, shape in SHAPES.items():
        npz = synthetic_npz(tmp / f"{name}.npz", args.examples, shape)
        shards = _prepare(npz, tmp / f"{name}-shards", 8)
        h, w, c = shape
        common = {"name": "tfrecord", "path": shards["output"], "image_size": [h, w],
                  "color_mode": "grayscale" if c == 1 else "rgb"}
        ways = {"memory": {**common, "loading": "memory"},
                "stream+cache": {**common, "loading": "stream", "cache": "memory"}}
        if args.uncached:
            ways["stream"] = {**common, "loading": "stream", "cache": "none"}
        results = {k: [] for k in ways}
        for _ in range(args.runs):
            for way, dataset in ways.items():
                results[way].append(_train(tmp, dataset, MODELS[name], args.epochs, 128))
        base = statistics.median(r["examples_per_sec"] for r in results["memory"])
        for way, runs in results.items():
            eps = statistics.median(r["examples_per_sec"] for r in runs)
            acc = statistics.median(r["accuracy"] for r in runs)
            wait = statistics.median(r["input_wait"] for r in runs)
            print(f"{name} {way:13s} {eps:8.0f} examples/s ({eps / base:.2f}x memory)  test accuracy {acc:.4f}  "
                  f"input wait {wait:.0%}  runs {[round(r['examples_per_sec']) for r in runs]}", flush=True)


def bench_prepare(args) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-prepare-"))
    npz = synthetic_npz(tmp / "mnist.npz", args.examples, SHAPES["mnist"])
    rates, whole = [], []
    for i in range(args.runs):
        result = _prepare(npz, tmp / f"out{i}", 8)
        rates.append(result["write_rate"])
        whole.append(result["images_per_sec"])
        print(f"run {i}: {result['write_rate']:,.0f} images/s writing, {result['images_per_sec']:,.0f} images/s "
              f"including reading the npz ({sum(result['counts'].values())} images)", flush=True)
    print(f"prepare median: {statistics.median(rates):,.0f} images/s writing (target >= 2,000), "
          f"{statistics.median(whole):,.0f} images/s for the command after TensorFlow started")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("memory", "throughput", "prepare"))
    parser.add_argument("--budget-mb", type=int, default=128)
    parser.add_argument("--examples", type=int, default=12000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--uncached", action="store_true", help="throughput: also stream without a cache")
    parser.add_argument("--quick", action="store_true", help="memory: skip the large set in memory")
    args = parser.parse_args()
    {"memory": bench_memory, "throughput": bench_throughput, "prepare": bench_prepare}[args.what](args)


if __name__ == "__main__":
    main()
