"""``replica-studio devices --check`` (and ``benchmarks/gpu_check.py``): every GPU path, in minutes.

Written for a machine with NVIDIA GPUs, one or eight: nothing here names a GPU count. Each
check runs the engine as a user does (``train`` of a small digits run under each strategy,
``export --check``) or a fresh Python (the devices, a plain Keras ``fit``), so every one starts
with a new TensorFlow runtime (memory growth and logical devices are fixed at its start):

- devices        every GPU listed, memory growth set, 64 MiB placed on each, peak far below its total
- one_device, mirrored_nccl, mirrored_hierarchical_copy, float16_all_reduce, mixed_precision,
  two_worker_cluster (MultiWorkerMirrored, two local workers on the GPUs, ring collectives:
  NCCL would refuse two ranks on one GPU): each run completes, every loss finite, each step
  with one replica statistic per replica on a GPU device, its examples/s (median after epoch 1)
- keras_fit      a plain Keras ``fit`` of the same model on GPU:0; one_device's examples/s against it
- nvml           the NVML panel's figures against ``nvidia-smi`` (names, total memory equal)
- export_parity  the mirrored run exported (SavedModel) and compared with ``export --check``

One table, JSON beside it, exit 1 on any failure. Without a GPU: one line, exit 0.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gui_app.identity import app_command, app_env

EPOCHS = 3
TIMEOUT_S = 600
RUNS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {  # name: (strategy, training changes)
    "one_device": ({"name": "one_device", "device": "GPU:0"}, {}),
    "mirrored_nccl": ({"name": "mirrored", "cross_device_ops": "nccl"}, {}),
    "mirrored_hierarchical_copy": ({"name": "mirrored", "cross_device_ops": "hierarchical_copy"}, {}),
    "float16_all_reduce": ({"name": "mirrored", "cross_device_ops": "nccl", "all_reduce_dtype": "float16"}, {}),
    "mixed_precision": ({"name": "mirrored"}, {"mixed_precision": True}),
    "two_worker_cluster": ({"name": "multi_worker_mirrored", "workers": 2, "communication": "ring"}, {}),
}


def gpus_seen() -> int:
    import tensorflow as tf

    return len(tf.config.list_physical_devices("GPU"))


def run_checks(json_path: Path, say=print) -> int:
    count = gpus_seen()
    if count == 0:
        say("gpu check: no GPU here (TensorFlow sees none); nothing to check")
        return 0
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="replica-studio-gpu-check-") as tmp:
        work = Path(tmp)
        results.append(_child("devices"))
        runs: dict[str, Path] = {}
        for name, (strategy, training) in RUNS.items():
            result, run_dir = _engine_run(name, strategy, training, count, work)
            results.append(result)
            if run_dir is not None:
                runs[name] = run_dir
        fit = _child("keras_fit")
        engine = next((r for r in results if r["check"] == "one_device"), {}).get("examples_per_s")
        if fit.get("examples_per_s") and engine:
            fit["detail"] += f"; the engine's one_device: {engine / fit['examples_per_s']:.2f}x of it"
        results.append(fit)
        results.append(_nvml())
        results.append(_export(runs.get("mirrored_nccl"), work))
    ok = all(r["ok"] for r in results)
    json_path.write_text(json.dumps({"ok": ok, "gpus": count, "checks": results}, indent=2) + "\n", encoding="utf-8")
    say(_table(results))
    say(f"{'every GPU path works' if ok else 'FAILED'}; details in {json_path}")
    return 0 if ok else 1


def _table(results: list[dict[str, Any]]) -> str:
    rows = [("check", "result", "seconds", "examples/s", "detail")]
    rows += [(r["check"], "ok" if r["ok"] else "FAIL", f"{r.get('seconds', 0):.1f}",
              f"{r['examples_per_s']:.0f}" if r.get("examples_per_s") else "-", r.get("detail", "")) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join([*(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])), row[4]]).rstrip()
                     for row in rows)


def _digits_config(strategy: dict[str, Any], training: dict[str, Any]) -> dict[str, Any]:
    return {"dataset": {"name": "digits"}, "model": {"name": "mnist_cnn"}, "strategy": strategy,
            "training": {"epochs": EPOCHS, "global_batch_size": 64, "seed": 1, **training},
            "runtime": {"gpu_memory_growth": True}}


def _engine_run(name: str, strategy: dict[str, Any], training: dict[str, Any], gpus: int,
                work: Path) -> tuple[dict[str, Any], Path | None]:
    config = work / f"{name}.json"
    config.write_text(json.dumps(_digits_config(strategy, training)), encoding="utf-8")
    started = time.monotonic()
    try:
        argv = app_command("train", str(config), "--runs-dir", str(work / "runs"), "--events", "jsonl")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, env=app_env(),
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"check": name, "ok": False, "detail": f"did not end within {TIMEOUT_S} s"}, None
    seconds = time.monotonic() - started
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    finished: dict[str, Any] = next((e for e in reversed(events) if e.get("type") == "run_finished"), {})
    result = {"check": name, "ok": False, "seconds": seconds}
    if done.returncode != 0 or finished.get("status") != "completed":
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        result["detail"] = f"exit {done.returncode}: {finished.get('message') or last}"
        return result, None
    steps = [e for e in events if e.get("type") == "step"]
    replicas = gpus * (2 if strategy["name"] == "multi_worker_mirrored" else 1)
    replicas = 1 if strategy["name"] == "one_device" else replicas
    problems = []
    if not steps or not all(e.get("loss") is not None and math.isfinite(e["loss"]) for e in steps):
        problems.append("a step without a finite loss")
    # A step's replica names its device only where run_started does not (protocol 3's lean lines).
    began: dict[str, Any] = next((e for e in events if e.get("type") == "run_started"), {})
    named = {r.get("replica"): r.get("device") for r in began.get("replicas") or [] if isinstance(r, dict)}
    wrong = [e["step"] for e in steps if len(e.get("replicas") or []) != replicas
             or not all("GPU" in (r.get("device", named.get(r.get("replica"))) or "").upper() for r in e["replicas"])]
    if wrong:
        problems.append(f"step {wrong[0]} has not {replicas} replica statistics on GPUs")
    steady = [e["examples_per_sec"] for e in steps if e.get("epoch", 0) > 1 and e.get("examples_per_sec")]
    result.update(ok=not problems, examples_per_s=statistics.median(steady) if steady else None,
                  detail="; ".join(problems) or f"{len(steps)} steps, {replicas} replicas on GPUs, "
                                                f"final loss {steps[-1]['loss']:.3f}")
    return result, Path(finished["run_dir"])


def _child(name: str) -> dict[str, Any]:
    """A check in a fresh Python (its own TensorFlow runtime): its last line is its JSON result."""
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "gui_app.engine.commands.devices_check", name],
                              capture_output=True, text=True, timeout=TIMEOUT_S, env=app_env(),
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"check": name, "ok": False, "detail": f"did not end within {TIMEOUT_S} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"check": name, "ok": False, "seconds": time.monotonic() - started, "detail": f"failed: {last}"}
    return {"check": name, "seconds": time.monotonic() - started, **json.loads(lines[-1])}


def _devices() -> dict[str, Any]:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    problems, names = [], []
    for i, gpu in enumerate(gpus):
        names.append(tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name))
        with tf.device(f"/GPU:{i}"):
            x = tf.ones([16 * 2**20], tf.float32)  # 64 MiB
            total = float(tf.reduce_sum(x).numpy())
        info = tf.config.experimental.get_memory_info(f"GPU:{i}")
        if total != 16 * 2**20:
            problems.append(f"GPU:{i} summed {total:.0f}")
        if not 64 * 2**20 <= info["peak"] < 2 * 2**30:  # growth: far from the whole card
            problems.append(f"GPU:{i} peak {info['peak'] / 2**20:.0f} MiB for a 64 MiB tensor (memory growth?)")
    return {"ok": not problems, "detail": "; ".join(problems) or f"{len(gpus)}: {', '.join(names)}; memory growth"}


def _keras_fit() -> dict[str, Any]:
    """A plain Keras fit of the engine's model on GPU:0, examples/s after the first epoch."""
    import keras

    from gui_app.core.config import ModelConfig
    from gui_app.engine.datasets.bundled import load_digits
    from gui_app.engine.training.models import build_model, channel_stats

    data = load_digits()
    x = data.x_train.astype("float32") / 255.0
    n = len(x) // 64 * 64
    keras.utils.set_random_seed(1)
    model = build_model(ModelConfig(name="mnist_cnn"), data.input_shape, len(data.class_names),
                        channel_stats=channel_stats(data.x_train))  # uint8: its [0, 1] statistics, as the engine
    model.compile(keras.optimizers.Adam(0.001), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=10)
    times: list[float] = []

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            times.append(time.perf_counter() - self.t)

    model.fit(x[:n], data.y_train[:n], batch_size=64, epochs=EPOCHS, verbose=0, callbacks=[Timer()])
    rate = n / statistics.median(times[1:]) if len(times) > 1 else None
    return {"ok": rate is not None, "examples_per_s": rate, "detail": "plain Keras fit, mnist_cnn, batch 64"}


def _nvml() -> dict[str, Any]:
    from gui_app.core.gpu_monitor import read_gpus

    samples = read_gpus()
    smi = shutil.which("nvidia-smi")
    if samples is None or smi is None:
        return {"check": "nvml", "ok": False, "detail": "NVML answers no GPU" if samples is None else "no nvidia-smi"}
    done = subprocess.run([smi, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True, timeout=60)
    rows = [[c.strip() for c in line.split(",")] for line in done.stdout.splitlines() if line.strip()]
    problems = [] if len(rows) == len(samples) else [f"NVML lists {len(samples)} GPUs, nvidia-smi {len(rows)}"]
    for sample, row in zip(samples, rows):
        if row[1] != sample.name:
            problems.append(f"GPU {sample.index}: NVML names {sample.name!r}, nvidia-smi {row[1]!r}")
        if sample.memory_total is None or abs(sample.memory_total / 2**20 - float(row[2])) > 1:
            problems.append(f"GPU {sample.index}: NVML total {sample.memory_total}, nvidia-smi {row[2]} MiB")
    return {"check": "nvml", "ok": not problems, "detail": "; ".join(problems) or f"{len(rows)} GPUs agree"}


def _export(run_dir: Path | None, work: Path) -> dict[str, Any]:
    if run_dir is None:
        return {"check": "export_parity", "ok": False, "detail": "the mirrored_nccl run failed"}
    started = time.monotonic()
    done = subprocess.run(app_command("export", str(run_dir), "--format", "savedmodel", "-o", str(work / "saved")),
                          capture_output=True, text=True, timeout=TIMEOUT_S, env=app_env(), stdin=subprocess.DEVNULL)
    last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
    return {"check": "export_parity", "ok": done.returncode == 0, "seconds": time.monotonic() - started,
            "detail": "SavedModel matches the GPU-trained model" if done.returncode == 0 else last}


if __name__ == "__main__":  # one check in a fresh process: python -m gui_app.engine.commands.devices_check NAME
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    found = {"devices": _devices, "keras_fit": _keras_fit}[sys.argv[1]]()
    print(json.dumps(found), flush=True)
