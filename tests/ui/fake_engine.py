"""The real engine's command line over a fake of TensorFlow's part: the UI tests' engine, in milliseconds.

``python tests/ui/fake_engine.py COMMAND ...`` runs ``gui_app.engine.commands.cli.main`` -- the real
parser, ``--detach`` (engine/run/detach.py), the run directory's name, lock, ``process.json``,
control channel and ``engine.log``, the event writer, the restore of the newest checkpoint, the
checkpoints' schedule, the NaN guard, ``eval.json``, the failures' lines and exit codes -- with
one seam replaced: the session that trains (``new_session`` in engine/commands/train.py). Its
stand-in, ``FakeSession`` in tests/ui/fake_training.py, keeps the real ``TrainingSession.run`` and
replaces its two TensorFlow parts (``set_up``: the input, the model and its checkpoint state;
``controller``: the real run controller and actions over a step runner that computes each step's
figures instead of training -- Lightning's BoringModel: a fake model, the real plumbing). Its
checkpoints are ``checkpoints/ckpt-N.index`` files holding the step and the data seed, so that
``resume`` restores through the real ``context.restore_latest``. Nothing imports TensorFlow (~6 s);
tests/test_event_schema.py checks the events against the protocol's schema.

``FAKE_ENGINE_MODE`` picks a behaviour (each "after step 3" counts the steps of this process):

    normal   train the configured number of steps, evaluate, finish completed
    wait     after step 3, wait for a control word before each step (stop, pause, continue)
    crash    after step 3, print a Python error on stderr and exit 1 without run_finished
    killed   after step 3, print a TensorFlow log line on stderr, then die by SIGKILL
    hang     like wait, but ignore stop (the supervisor must kill it)
    refuse   fail after run_started, before the first step, as a batch TensorFlow cannot decode
             does (an InvalidArgumentError: kind training, exit 1, the run directory kept)
    gpu      like normal, and ``devices`` reports one GPU
    diverge  replica 1's gradient norm grows 10x a step, and at step 7 its loss is NaN: the real
             NaN guard tells the finite steps, ``non_finite`` (the replay "found" layer ``logits``
             and example 17), an ``error`` (kind training) and ``run_finished`` failed, exit 1
    stall    like normal, but silent after step 3 for ``FAKE_ENGINE_STALL_SECONDS`` (default 2), or,
             with ``FAKE_ENGINE_STALL_UNTIL`` set to a FIFO the test made, until the test writes to
             it (a test that waits for the window to see the stall must not race a fixed silence
             against its own start-up on a loaded machine)

``FAKE_ENGINE_STEPS`` sets the number of training steps (default 20, spread over the config's
epochs), ``FAKE_ENGINE_STEP_SECONDS`` how long each takes (default 0). A bad dataset or model file
is refused by the real loaders' checks (numpy only), the way the real engine refuses it.

``devices`` (one GPU in ``gpu`` mode), ``inspect``, ``scaling``, ``prepare`` and ``rehearse``
stay small fakes of TensorFlow's commands, their answers shaped like the real ones; ``sweep`` is
tests/ui/fake_sweep.py. Every other command (``attach``, ``stop``, ``runs``, ...) is the real one
(``evaluate`` too, which loads TensorFlow: no UI test runs it).
Tests run it from any folder: it puts its own checkout first on the path.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# (after the line above: the checkout first on the path; this import takes 5 ms: no numpy)
from gui_app.engine.run.exits import RUN_COMMANDS, exit_now

MODE = os.environ.get("FAKE_ENGINE_MODE", "normal")
CLASSES = [str(i) for i in range(10)]
TEST_EXAMPLES = 50
VERSIONS = {"tensorflow": "2.21.0", "keras": "3.15.1", "python": platform.python_version()}


def input_refusal(config) -> str | None:
    """The real engine's line for a dataset or model file it refuses before TensorFlow starts."""
    from gui_app.engine.datasets import DatasetError, load_dataset
    from gui_app.engine.training.context import NUMPY_DATASETS
    from gui_app.engine.training.models import keras_file_refusal

    if config.dataset.name in NUMPY_DATASETS and config.dataset.path:  # a file of the user's (no download)
        try:
            load_dataset(config.dataset, None)
        except DatasetError as exc:
            return str(exc)
    if config.model.name == "keras_file" and config.model.path:
        return keras_file_refusal(config.model.path)
    return None


# ---- devices: what the real command prints, without its command line --------------------------------
def devices(argv) -> int:
    """``devices --json``: the real command's answer (engine/commands/devices.py: ``devices.detect()``
    and NVML's samples, none here) for a fake machine, one GPU in ``gpu`` mode. The real command line
    costs ~70 ms of CPU more to start, and every window the UI tests open asks for the devices once."""
    gpus = []
    if MODE == "gpu":
        gpus = [{"name": "GPU:0", "description": "NVIDIA Fake 4090", "memory_bytes": 24 * 2**30,
                 "compute_capability": [8, 9]}]
    logical = [{"name": "/device:CPU:0", "type": "CPU"}] + [{"name": "/device:GPU:0", "type": "GPU"} for _ in gpus]
    print(json.dumps({**VERSIONS, "gpus": gpus, "cpu": {"name": "CPU:0", "description": "Fake CPU", "cores": 2},
                      "logical_devices": logical, "nccl_available": False, "cuda_build": bool(gpus), "nvml": None}))
    return 0


# ---- the tools: small fakes ------------------------------------------------------------------------
def inspect(config_path, samples_path):
    import numpy as np

    from gui_app.core.config import RunConfig
    from gui_app.core.image_files import source_images  # as the real inspect reports them

    config = RunConfig.load(config_path)
    problem = input_refusal(config)
    if problem:
        sys.stderr.write("W0000 tensorflow: some warning an engine prints first\n")
        sys.stderr.write(f"replica-studio inspect: {problem}\n")
        return 2
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 3)
    np.savez(samples_path, x=rng.integers(0, 255, size=(30, 8, 8, 1), dtype=np.uint8), y=y)
    print(json.dumps({
        "dataset": {"name": config.dataset.name, "class_names": CLASSES, "input_shape": [8, 8, 1],
                    "train_examples": 1000, "test_examples": TEST_EXAMPLES, "class_counts": [100] * 10,
                    "warnings": [], "source_images": source_images(config.dataset.name, config.dataset.path)},
        "model": {"name": config.model.name, "parameters": 1234, "trainable_parameters": 1200,
                  "layers": [{"name": "conv", "type": "Conv2D", "output_shape": [None, 6, 6, 8], "parameters": 80},
                             {"name": "dense", "type": "Dense", "output_shape": [None, 10], "parameters": 1154}]},
    }))
    return 0


def tool_progress(stage, message, **keys):
    """A ``progress`` line of the tool commands, shaped like gui_app.core.events.Progress."""
    print(json.dumps({"type": "progress", "time": time.time(), "stage": stage, **keys, "message": message}),
          flush=True)


def scaling(argv):
    """``scaling CONFIG ... --output DIR --json``: progress lines, then a report shaped like the
    real one (gui_app.core.scaling.report); ``wait`` mode hangs after the first burst starts."""
    out = argv[argv.index("--output") + 1]
    strategies = argv[argv.index("--strategies") + 1].split(",")
    tool_progress("scaling", f"{strategies[0]}: training", what="bursts", done=0, total=len(strategies),
                  fraction=0.0)
    if MODE == "wait":
        time.sleep(600)
    rows = []
    for n, name in enumerate(strategies):
        replicas = n + 1
        rows.append({"label": f"{name}, {replicas} replicas", "strategy": {"name": name}, "replicas": replicas,
                     "examples_per_sec": 1000.0 * (1 + 0.5 * n), "eval_examples_per_sec": None,
                     "speedup": 1 + 0.5 * n, "ideal": float(replicas), "efficiency": (1 + 0.5 * n) / replicas,
                     "steps": 10, "time_split": {"compute": 0.6, "input": 0.1, "other": 0.3}, "devices": [],
                     "error": None})
    rows.append({"label": "parameter servers", "strategy": {"name": "parameter_server"}, "replicas": 2,
                 "examples_per_sec": None, "eval_examples_per_sec": None, "speedup": None, "ideal": None,
                 "efficiency": None, "steps": 0, "time_split": None, "loss": None, "devices": [],
                 "error": "the ps process did not start"})
    for row in rows[:-1]:
        row["loss"] = 1.25
    options = []
    if "--options" in argv:  # shaped like gui_app.core.scaling_options.option_rows
        for option, speed, loss in (("baseline", 1.0, 1.25), ("all-reduce in float16", 0.9, 1.2504),
                                    ("accumulate 4 micro-batches", 0.8, 1.25),
                                    ("batch 16, no accumulation (reference)", 0.5, 1.6)):
            comparable = "reference" not in option
            options.append({"label": f"mirrored, 2 replicas: {option}", "group": "mirrored, 2 replicas",
                            "option": option, "strategy": {"name": "mirrored"}, "training": {"seed": 1},
                            "replicas": 2, "examples_per_sec": 1500.0 * speed, "speed_vs_baseline": speed,
                            "loss": loss, "loss_vs_baseline": round(loss - 1.25, 6) if comparable else None,
                            "loss_comparable": comparable, "steps": 10,
                            "time_split": {"compute": 0.6, "input": 0.1, "other": 0.3}, "devices": [], "error": None})
    report = {"version": 2, "on_gpus": False, "rows": rows, "options": options, "baseline": rows[0]["label"],
              "recommendation": "Fastest here: the fake."}
    os.makedirs(out, exist_ok=True)
    json.dump(report, open(os.path.join(out, "scaling.json"), "w", encoding="utf-8"))
    from gui_app.core.scaling_options import to_svg  # the real chart of the fake figures (Qt- and TF-free)

    with open(os.path.join(out, "scaling.svg"), "w", encoding="utf-8") as f:
        f.write(to_svg(report))
    tool_progress("scaling", "report written", what="bursts", done=len(strategies), total=len(strategies),
                  fraction=1.0)
    print(json.dumps({"type": "scaling_report", "path": os.path.join(out, "scaling.json"), **report}), flush=True)
    return 0


def prepare(argv):
    """``prepare CONFIG --output DIR [--shards N] --json``: progress lines, then a ``prepared`` line
    shaped like the real ones; a folder that is not empty is refused as the real command does
    (one line, exit 2); ``wait`` mode hangs after the first progress line."""
    out = argv[argv.index("--output") + 1]
    if os.path.exists(out) and os.listdir(out):
        sys.stderr.write(f"replica-studio prepare: --output: {out} exists and is not an empty folder\n")
        return 2
    total = 100
    for done in (0, 40, total):
        tool_progress("write", f"Writing {done:,} of {total:,} images (1,000 images/s)", what="images", done=done,
                      total=total, images_per_sec=1000.0)
        if MODE == "wait":
            time.sleep(600)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump({"image_shape": [8, 8, 1], "counts": {"train": 80, "test": 20}, "files": []}, f)
    print(json.dumps({"type": "prepared", "output": out, "counts": {"train": 80, "test": 20}, "classes": 10,
                      "shards": 2, "seconds": 0.1, "images_per_sec": 1000.0}), flush=True)
    return 0


def rehearse(argv):
    """``rehearse CONFIG --at STEP ... --json``: after a progress-free wait (``wait`` mode: for
    ever, until cancelled), a certificate shaped like the real one; not equivalent at step 13.
    Its two runs are the folders FAKE_ENGINE_REFERENCE_RUN and FAKE_ENGINE_REHEARSED_RUN name
    (a test writes them), else folders that do not exist."""
    at = int(argv[argv.index("--at") + 1])
    worker = int(argv[argv.index("--worker") + 1]) if "--worker" in argv else None
    while os.environ.get("FAKE_ENGINE_MODE") == "wait":
        time.sleep(0.05)
    first = {"step": at + 1, "what": "batch of replica 0"} if at == 13 else None
    print(json.dumps({"equivalent": first is None, "steps": 40, "batches_identical": first is None,
                      "max_loss_diff": 0.0 if first is None else 0.1, "max_weight_diff": 0.0 if first is None else 0.02,
                      "first_difference": first,
                      "reference_run": os.environ.get("FAKE_ENGINE_REFERENCE_RUN", "/runs/a"),
                      "rehearsed_run": os.environ.get("FAKE_ENGINE_REHEARSED_RUN", "/runs/b"),
                      "strategy": "mirrored", "signal": argv[argv.index("--signal") + 1], "worker": worker, "at": at,
                      "interrupted_at": at + 1, "resumed_from": at - 1}), flush=True)
    return 0 if first is None else 1


def main(argv):
    command = argv[0] if argv else ""
    if command == "sweep":
        from fake_sweep import sweep

        return sweep(argv)
    fakes = {"scaling": scaling, "prepare": prepare, "rehearse": rehearse, "devices": devices,
             "inspect": lambda argv: inspect(argv[1], argv[argv.index("--samples") + 1])}
    if command in fakes:
        return fakes[command](argv)
    from gui_app.engine.commands import train as train_command
    from gui_app.engine.commands.cli import main as engine_main

    if command in RUN_COMMANDS:  # (the training modules only where a run trains, as in the engine)
        sys.modules.setdefault("fake_engine", sys.modules["__main__"])  # its constants, not a second copy
        from fake_training import FakeSession

        train_command.new_session = FakeSession
    code = engine_main(argv)
    if command in RUN_COMMANDS:
        exit_now(code)  # as python -m gui_app.engine ends a run
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
