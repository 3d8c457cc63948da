"""In-memory input: the engine's peak memory against TensorFlow's own, and its speed before/after.

    python benchmarks/bench_memory.py [--examples 60000] [--size 96] [--epochs 2] [--runs 3]
                                      [--strategy default|mirrored] [--before DIR] [--data DIR] [--json OUT]

The data: ``--examples`` synthetic but learnable JPEGs (a smooth class template plus noise) of
``--size`` x ``--size`` x 3, written once as TFRecord shards (five sixths for training, the rest
a test folder) under ``--data`` (default: the system's temporary folder). The run
config reads them with ``loading: auto``, which keeps a set below the memory budget (25 % of RAM)
in memory: the path measured here. Model ``mlp``, batch 128, validation split 0.1, ``--epochs``
epochs, the default strategy (or MirroredStrategy over two logical CPUs: ``--strategy mirrored``).

Processes, interleaved (baseline, tiny, after, before; then again), each measured whole with
the peak resident memory the kernel reports for it (``ru_maxrss``):
  baseline  TensorFlow's own: a process that imports TensorFlow, configures the engine's runtime
            and builds the same model and optimizer under the same strategy, nothing else;
  tiny      this checkout's engine on 1,200 images of the same size: what training this model
            costs besides the set (gradients, the optimizer's temporaries, the traced functions);
  after     ``replica-studio train`` with this checkout's engine;
  before    the same command with the engine of ``--before`` (a checkout of an earlier commit:
            ``git worktree add /tmp/before COMMIT``), when given.
Figures: the engine's peak above the baseline in units of the decoded set (target <= 1.2) and
above the tiny run (the set's own share), and the examples/s of the last epoch (from the
checkpoint that ends the one before it to its last step event: the per-epoch input work, the
steps and their events), after/before per interleaved pair (target >= 1.0). Medians over the
runs, spread beside them. Not part of the test suite.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

CLASSES = 10
TRAIN_SHARDS, TEST_SHARDS = 16, 4
TINY = 1200


def write_shards(folder: Path, examples: int, size: int) -> Path:
    """The set as TFRecord shards (``train/``, ``test/``), written once; returns ``folder``."""
    done = folder / "done.json"
    if done.exists() and json.loads(done.read_text()) == {"examples": examples, "size": size}:
        return folder
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    coarse = rng.uniform(0, 255, (CLASSES, 6, 6, 3))
    cell = -(-size // 6)
    templates = np.kron(coarse, np.ones((1, cell, cell, 1)))[:, :size, :size]  # smooth, so JPEG keeps it
    test_from = examples * 5 // 6
    for part, shards, count in (("train", TRAIN_SHARDS, test_from), ("test", TEST_SHARDS, examples - test_from)):
        (folder / part).mkdir(parents=True, exist_ok=True)
        writers = [tf.io.TFRecordWriter(str(folder / part / f"{part}-{s:05d}-of-{shards:05d}.tfrecord"))
                   for s in range(shards)]
        for n in range(count):
            label = int(rng.integers(CLASSES))
            image = np.clip(templates[label] * 0.6 + 50 + rng.normal(0, 40, (size, size, 3)), 0, 255)
            encoded = tf.io.encode_jpeg(image.astype(np.uint8), quality=90).numpy()
            feature = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded])),
                       "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}
            writers[n % shards].write(tf.train.Example(features=tf.train.Features(feature=feature))
                                      .SerializeToString())
        for writer in writers:
            writer.close()
    done.write_text(json.dumps({"examples": examples, "size": size}))
    return folder


STRATEGIES = {"default": ({"name": "default"}, {}),
              "mirrored": ({"name": "mirrored", "devices": ["CPU:0", "CPU:1"]}, {"cpu_devices": 2})}


def run_config(data: Path, size: int, epochs: int, strategy: str) -> dict:
    chosen, runtime = STRATEGIES[strategy]
    return {"dataset": {"name": "tfrecord", "path": str(data / "train"), "test_path": str(data / "test"),
                        "image_size": [size, size], "color_mode": "rgb", "loading": "auto"},
            "model": {"name": "mlp"}, "strategy": chosen, "runtime": runtime,
            "training": {"epochs": epochs, "global_batch_size": 128, "seed": 1}}


BASELINE = """
import json, sys
from gui_app.core.config import RunConfig
from gui_app.engine.training.devices import configure_runtime
from gui_app.engine.training.models import build_model
from gui_app.engine.training.optim import build_optimizer, make_schedule
from gui_app.engine.training.strategies import build_strategy

config = RunConfig.load(sys.argv[1])
configure_runtime(config.runtime)
built = build_strategy(config.strategy)
size = config.dataset.image_size
with built.strategy.scope():
    model = build_model(config.model, (*size, 3), 10, channel_stats=([0.5] * 3, [0.1] * 3))
    optimizer = build_optimizer(config.training, make_schedule(config.training, 100, 1000))
    optimizer.build(model.trainable_variables)
print(model.count_params())
"""


def peak_run(command: list[str], environment: dict[str, str]) -> tuple[float, str, int]:
    """(wall seconds, stdout, peak RSS bytes) of one process, measured by a wrapper whose only
    child it is (``ru_maxrss`` of RUSAGE_CHILDREN is the largest child's)."""
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE); "
               "sys.stdout.buffer.write(r.stdout); "
               "sys.stdout.write('\\nMAXRSS %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
               "sys.exit(r.returncode)")
    seconds, out = common.timed([common.PYTHON, "-c", wrapper, *command], environment, timeout=3600)
    lines = out.rstrip().splitlines()
    return seconds, "\n".join(lines[:-1]), int(lines[-1].split()[1]) * 1024  # Linux: KiB


def last_epoch_rate(stdout: str) -> tuple[float, float | None]:
    """(examples/s of the last epoch, test accuracy) from a run's JSON events."""
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    started = next(e for e in events if e["type"] == "run_started")
    last = started["epochs"]
    begin = [e for e in events if e["type"] == "checkpoint" and e["step"] == (last - 1) * started["steps_per_epoch"]]
    steps = [e for e in events if e["type"] == "step" and e["epoch"] == last]
    examples = sum(r["examples"] for e in steps for r in e["replicas"])
    evaluation = [e for e in events if e["type"] == "eval"]
    return examples / (steps[-1]["time"] - begin[-1]["time"]), evaluation[0]["accuracy"] if evaluation else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=60000)
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--strategy", choices=tuple(STRATEGIES), default="default")
    parser.add_argument("--before", help="a checkout of the engine to compare with")
    parser.add_argument("--data", help="folder for the shard folders (kept between runs)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    folder = Path(args.data or tempfile.gettempdir())
    data = write_shards(folder / f"replica-studio-memory-{args.examples}-{args.size}", args.examples, args.size)
    tiny = write_shards(folder / f"replica-studio-memory-{TINY}-{args.size}", TINY, args.size)
    decoded = args.examples * args.size * args.size * 3
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:  # the runs: checkpoints, models
        work = Path(tmp)
        config, tiny_config = work / "config.json", work / "tiny.json"
        config.write_text(json.dumps(run_config(data, args.size, args.epochs, args.strategy)))
        tiny_config.write_text(json.dumps(run_config(tiny, args.size, args.epochs, args.strategy)))
        engines = {"after": common.ROOT, **({"before": Path(args.before).resolve()} if args.before else {})}
        runs = {"tiny": (common.ROOT, tiny_config), **{name: (root, config) for name, root in engines.items()}}
        peaks: dict[str, list[float]] = {name: [] for name in ("baseline", *runs)}
        rates: dict[str, list[float]] = {name: [] for name in runs}
        for run in range(args.runs):
            _, _, peak = peak_run([common.PYTHON, "-c", BASELINE, str(config)], common.env())
            peaks["baseline"].append(peak)
            print(f"run {run + 1}: baseline {peak / 2**30:.2f} GiB", flush=True)
            for name, (root, cfg) in runs.items():
                command = [common.PYTHON, "-m", "gui_app.engine", "train", str(cfg), "--runs-dir",
                           str(work / f"runs-{name}"), "--events", "jsonl"]
                seconds, out, peak = peak_run(command, common.env(root))
                rate, accuracy = last_epoch_rate(out)
                peaks[name].append(peak)
                rates[name].append(rate)
                print(f"run {run + 1}: {name} {peak / 2**30:.2f} GiB peak, {rate:,.0f} examples/s, test accuracy "
                      f"{accuracy}, {seconds:.0f} s", flush=True)
    figures = []
    for name in engines:
        above = [(p - b) / decoded for p, b in zip(peaks[name], peaks["baseline"])]
        figures.append(common.figure(f"{name}: engine peak RSS above TensorFlow's, x decoded set", above,
                                     1.2 if name == "after" else None, better="lower",
                                     peak_gib=statistics.median(peaks[name]) / 2**30))
        share = [(p - t) / decoded for p, t in zip(peaks[name], peaks["tiny"])]
        figures.append(common.figure(f"{name}: engine peak RSS above the tiny run, x decoded set", share, None,
                                     better="lower"))
    figures.append(common.figure("tiny run peak RSS, GiB", [p / 2**30 for p in peaks["tiny"]], None, unit="GiB"))
    figures.append(common.figure("TensorFlow baseline peak RSS, GiB", [p / 2**30 for p in peaks["baseline"]], None,
                                 unit="GiB", decoded_gib=decoded / 2**30))
    figures.append(common.figure("after: examples/s, last epoch", rates["after"], None, unit="ex/s"))
    if "before" in engines:
        figures.append(common.figure("examples/s after/before, last epoch (per pair)",
                                     [a / b for a, b in zip(rates["after"], rates["before"])], 1.0))
    common.show(figures)
    return common.finish(figures, args.json)


if __name__ == "__main__":
    sys.exit(main())
