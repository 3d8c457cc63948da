"""A stand-in for ``python -m gui_app.engine`` that speaks the event protocol in milliseconds.

The UI tests run it instead of the real engine (which needs ~6 s to import TensorFlow).
It builds its ``train``/``resume`` events from the protocol's classes (gui_app.core.events) and
encodes them as the real engine's writer does; tests/test_event_schema.py checks them against the
schema derived from those classes, as it checks the real engine's. It prints the JSON of
``devices --json`` and ``inspect``, writes run directories like the real one (plus
``engine.pid``, for the tests that check the process is gone), and fails the way the real one
does: an ``error`` and a ``run_finished`` event in a run directory it created, one line
``replica-studio COMMAND: message`` on stderr, exit 2. ``FAKE_ENGINE_MODE`` picks a
behaviour:

    normal   train the configured number of steps, evaluate, finish completed
    wait     emit a few steps, then wait on stdin for control words (stop/pause/continue)
    crash    emit a few steps, print a Python error on stderr and exit 1 without run_finished
    killed   emit a few steps, print a TensorFlow log line on stderr, then die by SIGKILL
    hang     like wait, but ignore stop (the supervisor must kill it)
    refuse   fail after run_started, before the first step (its input refused once loaded), in the
             run directory it made
    gpu      like normal, and ``devices`` reports one GPU
    diverge  as the real NaN guard trips: replica 1's gradient norm climbs for 6 steps, then at step
             7 its loss is NaN: the finite steps, a ``non_finite`` event, an ``error`` (kind
             training) and ``run_finished`` failed, exit 1; no checkpoint is kept (the replay
             named layer ``logits`` and example 17)
    stall    like normal, but silent after step 3 for ``FAKE_ENGINE_STALL_SECONDS`` (default 2), or,
             with ``FAKE_ENGINE_STALL_UNTIL`` set to a FIFO the test made, until the test writes to
             it (a test that waits for the window to see the stall must not race a fixed silence
             against its own start-up on a loaded machine)

``sweep`` is tests/ui/fake_sweep.py (the real status and stop over real sweep folders; no trial trains).

``FAKE_ENGINE_STEPS`` sets the number of training steps (default 20), ``FAKE_ENGINE_STEP_SECONDS``
how long each takes (default 0). Tests run it from any
folder: it imports gui_app.core.events (Qt- and TensorFlow-free) from its own checkout.

``train --detach`` and ``resume --detach`` work as the real ones do (docs/detached.md): the run
forks into a session of its own, holds the run's lock, records ``process.json``, reads control
words from the run's channel (the real ``engine/run/control_fifo.py``) and writes its output to
``engine.log``; the starting process prints the run directory once ``run_started`` is written,
or the run's error line (exit 2, no run directory left behind). ``attach``, ``stop`` and
``runs`` are the real commands (they load no TensorFlow).
"""
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gui_app.core import events as ev  # noqa: E402  (the checkout first on the path)
from gui_app.core.image_files import source_images  # noqa: E402  (as the real inspect reports them)

MODE = os.environ.get("FAKE_ENGINE_MODE", "normal")
DETACH = "--detach" in sys.argv
WAIT_LIMIT_S = 120.0  # a detached run nobody stops (a failed test) ends on its own
STEPS = int(os.environ.get("FAKE_ENGINE_STEPS", "20"))
STEP_SECONDS = float(os.environ.get("FAKE_ENGINE_STEP_SECONDS", "0"))
CLASSES = [str(i) for i in range(10)]
TEST_EXAMPLES = 50


class Emitter:
    """Each event to the run's events.jsonl and to stdout; a detached run's go to the starting
    process's pipe instead, until run_started or run_finished (engine/run/detach.py's ReadyPipe)."""

    ready = -1  # the pipe to the process that started a detached run

    def __init__(self, run_dir):
        self.run_dir = run_dir
        self.file = open(os.path.join(run_dir, "events.jsonl"), "a", encoding="utf-8") if run_dir else None

    def __call__(self, event: ev.Event):
        event.time = event.time or time.time()
        line = json.dumps(ev.encode(event))
        if self.file:
            self.file.write(line + "\n")
            self.file.flush()
        if not DETACH:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        elif Emitter.ready >= 0:
            os.write(Emitter.ready, (line + "\n").encode())
            if isinstance(event, (ev.RunStarted, ev.RunFinished)):
                os.close(Emitter.ready)
                Emitter.ready = -1


def devices():
    gpus = []
    if MODE == "gpu":
        gpus = [{"name": "GPU:0", "description": "NVIDIA Fake 4090", "memory_bytes": 24 * 2**30,
                 "compute_capability": [8, 9]}]
    print(json.dumps({"tensorflow": "2.21.0", "keras": "3.15.1", "gpus": gpus,
                      "cpu": {"name": "CPU:0", "description": "Fake CPU", "cores": 2},
                      "nccl_available": False}))
    return 0


def inspect(config_path, samples_path):
    config = json.load(open(config_path, encoding="utf-8"))
    problem = input_problem(config)
    if problem:
        sys.stderr.write("W0000 tensorflow: some warning an engine prints first\n")
        sys.stderr.write(f"replica-studio inspect: {problem}\n")
        return 2
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 3)
    np.savez(samples_path, x=rng.integers(0, 255, size=(30, 8, 8, 1), dtype=np.uint8), y=y)
    print(json.dumps({
        "dataset": {"name": config["dataset"]["name"], "class_names": CLASSES, "input_shape": [8, 8, 1],
                    "train_examples": 1000, "test_examples": TEST_EXAMPLES, "class_counts": [100] * 10,
                    "warnings": [],
                    "source_images": source_images(config["dataset"]["name"], config["dataset"].get("path"))},
        "model": {"name": config["model"]["name"], "parameters": 1234, "trainable_parameters": 1200,
                  "layers": [{"name": "conv", "type": "Conv2D", "output_shape": [None, 6, 6, 8], "parameters": 80},
                             {"name": "dense", "type": "Dense", "output_shape": [None, 10], "parameters": 1154}]},
    }))
    return 0


def input_problem(config):
    """The real engine's one-line messages for the bad inputs the UI tests use."""
    path = config["dataset"].get("path")
    if path and not os.path.exists(path):
        return f"{path}: no such file or folder"
    if path and os.path.isfile(path) and open(path, "rb").read(3) == b"bad":
        return f"{path}: not an .npz file (no zip signature at its start)"
    model_path = config["model"].get("path")
    if config["model"]["name"] == "keras_file" and not os.path.exists(model_path):
        return f"model.path: no such file: {model_path}"
    return None


def fail(command, run_dir, message):
    emit = Emitter(run_dir)
    emit(ev.Error(message=message, kind="input"))
    emit(ev.RunFinished(status="failed", run_dir=run_dir, step=0, message=message))
    sys.stderr.write(f"replica-studio {command}: {message}\n")
    if DETACH:  # refused before it trained: the real engine leaves nothing half-made behind
        shutil.rmtree(run_dir)
    return 2


def control_reader():
    """Words from stdin into a list the training loop polls; EOF counts as stop."""
    words = []

    def read():
        for line in sys.stdin:
            words.append(line.strip())
        words.append("stop")

    threading.Thread(target=read, daemon=True).start()
    return words


class _Words:
    """The run's control channel feeds the list the training loop polls."""

    def __init__(self, words):
        self.words = words

    def command(self, word):
        if word.strip():
            self.words.append(word.strip())


def take_run(run_dir, command):
    """What a real detached run keeps while it holds the run (engine/run/presence.py): its lock,
    process.json, the control channel, its output in engine.log."""
    from gui_app.core.live_runs import record_process
    from gui_app.core.run_lock import RunLock
    from gui_app.engine.run.control_fifo import ControlChannel

    log = os.open(os.path.join(run_dir, "engine.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    words = []
    take_run.held = (RunLock(run_dir).acquire(), ControlChannel(run_dir, _Words(words)).open())
    record_process(run_dir, command, True)
    return words


def detached(run):
    """Fork ``run`` (which takes the ready pipe) into a session of its own; print the run
    directory once it has started, or its error line (engine/run/detach.py)."""
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code = 1
        try:
            from gui_app.engine.run.process import leave_the_terminal

            leave_the_terminal()
            Emitter.ready = write_end
            code = run()
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        for line in pipe:
            event = json.loads(line)
            if event["type"] == "run_started":
                print(event["run_dir"], flush=True)
                return 0
            if event["type"] == "run_finished":
                sys.stderr.write(f"replica-studio {sys.argv[1]}: {event['message']}\n")
                os.waitpid(pid, 0)
                return 2
    _, status = os.waitpid(pid, 0)
    sys.stderr.write(f"replica-studio {sys.argv[1]}: the run's process ended before the run started\n")
    return os.waitstatus_to_exitcode(status) or 1


def train(config, run_dir, resumed, start_step):
    emit = Emitter(run_dir)
    channel_words = take_run(run_dir, "resume" if resumed else "train") if DETACH else None
    devices = config["strategy"].get("devices") or ["CPU:0"]
    replicas = len(devices)
    batch = config["training"]["global_batch_size"]
    steps_per_epoch = max(1, STEPS // config["training"]["epochs"])
    total = steps_per_epoch * config["training"]["epochs"]
    with open(os.path.join(run_dir, "engine.pid"), "w", encoding="utf-8") as f:
        f.write(str(os.getpid()))
    emit(ev.RunStarted(
        run_dir=run_dir, config=config, resumed=resumed, start_step=start_step, total_steps=total,
        steps_per_epoch=steps_per_epoch, epochs=config["training"]["epochs"], num_replicas=replicas,
        replicas=[ev.ReplicaInfo(replica=i, device=d) for i, d in enumerate(devices)],
        global_batch_size=batch, per_replica_batch_size=batch // replicas,
        dataset={"name": config["dataset"]["name"], "class_names": CLASSES, "input_shape": [8, 8, 1],
                 "train_examples": 1000, "validation_examples": 100, "test_examples": TEST_EXAMPLES},
        model={"name": config["model"]["name"], "parameters": 1234},
        strategy={"name": config["strategy"]["name"], "cross_device_ops": None},
        versions={"tensorflow": "2.21.0", "keras": "3.15.1", "python": sys.version.split()[0]}))
    if MODE == "refuse":
        message = "the input was refused on purpose"
        emit(ev.Error(message=message, kind="input"))
        emit(ev.RunFinished(status="failed", run_dir=run_dir, step=start_step, message=message))
        sys.stderr.write(f"replica-studio train: {message}\n")
        return 2
    if channel_words is not None:
        words = channel_words
    else:
        words = control_reader() if MODE in ("wait", "hang") else []
    paused = False
    step = start_step
    while step < total:
        if MODE in ("wait", "hang") and step - start_step >= 3 and not paused:
            deadline = time.monotonic() + WAIT_LIMIT_S
            while not words:
                if time.monotonic() > deadline:
                    return 1
                time.sleep(0.005)
        while words:
            word = words.pop(0)
            if word == "stop" and MODE == "hang":
                continue  # a stuck engine: only a kill ends it
            if word == "stop":
                os.makedirs(os.path.join(run_dir, "checkpoints"), exist_ok=True)
                emit(ev.Checkpoint(step=step, path=os.path.join(run_dir, "checkpoints", f"ckpt-{step}")))
                emit(ev.RunFinished(status="stopped", run_dir=run_dir, step=step))
                return 0
            if word == "pause":
                paused = True
                emit(ev.Paused(step=step))
            elif word in ("continue", "resume"):
                paused = False
                emit(ev.Continued(step=step))
        if paused:
            time.sleep(0.005)
            continue
        if MODE == "killed" and step - start_step >= 3:
            sys.stderr.write("E0000 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        if MODE == "crash" and step - start_step >= 3:
            sys.stderr.write("Traceback (most recent call last):\n  File \"x\", line 1\n")
            sys.stderr.write("RuntimeError: fake engine crashed on purpose\n")
            return 1
        time.sleep(STEP_SECONDS)
        if MODE == "stall" and step - start_step == 3:
            release = os.environ.get("FAKE_ENGINE_STALL_UNTIL")
            if release:
                # Blocked in open() until the test writes: asleep in /proc the whole time (a 20 ms
                # poll was sometimes caught runnable on a loaded machine, and the stall said "running").
                with open(release) as fifo:
                    fifo.read()
            else:
                time.sleep(float(os.environ.get("FAKE_ENGINE_STALL_SECONDS", "2")))
        step += 1
        epoch = (step - 1) // steps_per_epoch + 1
        loss = 2.3 / step
        if MODE == "diverge" and step == DIVERGE_STEP:
            return diverge(emit, run_dir, step, replicas)
        emit(ev.Step(step=step, epoch=epoch, loss=loss, accuracy=min(1.0, step / total), learning_rate=0.001,
                     examples_per_sec=1000.0, step_time=0.01,
                     replicas=[ev.ReplicaStats(replica=i, device=d, loss=loss * (1 + 0.1 * i), accuracy=0.5,
                                               examples=batch // replicas, grad_norm=grad_norm(step, i),
                                               step_time=0.01 * (1 + i), examples_per_sec=1000.0 / (1 + i))
                               for i, d in enumerate(devices)]))
        if step % steps_per_epoch == 0:
            os.makedirs(os.path.join(run_dir, "checkpoints"), exist_ok=True)
            emit(ev.EpochEnd(epoch=epoch, step=step, loss=loss, accuracy=0.5, val_loss=loss, val_accuracy=0.6,
                             duration=0.1))
    matrix = [[5 if i == j else 0 for j in range(10)] for i in range(10)]
    matrix[0][1], matrix[0][0] = 1, 4
    evaluation = ev.Eval(loss=0.1, accuracy=0.98, examples=TEST_EXAMPLES, confusion_matrix=matrix, class_names=CLASSES,
                         per_class=[ev.ClassMetrics(index=i, name=c, precision=1.0, recall=1.0, f1=1.0, support=5)
                                    for i, c in enumerate(CLASSES)],
                         examples_per_replica=[TEST_EXAMPLES // replicas] * replicas)
    with open(os.path.join(run_dir, "eval.json"), "w", encoding="utf-8") as f:  # before the event, as the engine
        json.dump({k: v for k, v in ev.encode(evaluation).items() if k not in ("type", "time")}, f)
    emit(evaluation)
    emit(ev.RunFinished(status="completed", run_dir=run_dir, step=step))
    return 0


DIVERGE_STEP = 7  # diverge mode: the step whose loss is NaN


def grad_norm(step, replica):
    """Each replica's gradient norm; in diverge mode replica 1's grows 10x a step (the learning rate)."""
    return 10.0 ** step if MODE == "diverge" and replica == 1 else 1.0 / step


def diverge(emit, run_dir, step, replicas):
    """What the real engine writes when its NaN guard trips (engine/training/actions/nan_guard.py):
    the non_finite event, then the run's error and end (engine/run/failures.py: kind training, exit 1)."""
    emit(ev.NonFinite(step=step, first="loss", replica=min(1, replicas - 1), worker=None,
                      replicas=[min(1, replicas - 1)], loss=None, grad_norm=None, checkpoint=None,
                      replayed=True, replay_step=step, layer="logits", layer_part="activations", examples=[17],
                      examples_count=1, replay_seconds=0.4))
    message = (f"the loss became NaN or infinite at step {step}; try a lower training.learning_rate (no checkpoint "
               "was written before it, so there is nothing to resume: train again with a lower "
               "training.learning_rate)")
    emit(ev.Error(message=message, kind="training"))
    emit(ev.RunFinished(status="failed", run_dir=run_dir, step=step - 1, message=message))
    sys.stderr.write(f"replica-studio train: {message}\n")
    return 1


def new_run_dir(runs_dir, config):
    stem = time.strftime("%Y%m%d-%H%M%S") + f"-{config['dataset']['name']}-{config['model']['name']}"
    for n in range(1000):
        path = os.path.join(runs_dir, stem if n == 0 else f"{stem}-{n}")
        try:
            os.makedirs(path)
        except FileExistsError:
            continue
        json.dump(config, open(os.path.join(path, "config.json"), "w", encoding="utf-8"))
        return path


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
    command = argv[0]
    if command in ("attach", "stop", "runs"):
        from gui_app.engine.commands.cli import main as engine_main

        return engine_main(argv)
    if command == "sweep":
        from fake_sweep import sweep

        return sweep(argv)
    if "--detach" in argv and command in ("train", "resume"):
        argv = [word for word in argv if word != "--detach"]
        return detached(lambda: main(argv))
    if command == "scaling":
        return scaling(argv)
    if command == "prepare":
        return prepare(argv)
    if command == "rehearse":
        return rehearse(argv)
    if command == "devices":
        return devices()
    if command == "inspect":
        return inspect(argv[1], argv[argv.index("--samples") + 1])
    if command == "train":
        config = json.load(open(argv[1], encoding="utf-8"))
        runs_dir = argv[argv.index("--runs-dir") + 1]
        os.makedirs(runs_dir, exist_ok=True)
        run_dir = new_run_dir(runs_dir, config)  # the real engine makes it before loading data
        problem = input_problem(config)
        if problem:
            return fail("train", run_dir, problem)
        return train(config, run_dir, False, 0)
    if command == "resume":
        run_dir = argv[1]
        if os.path.isfile(run_dir):  # a run bundle: extracted into a new run folder, as the real engine does
            from gui_app.core.bundle import open_bundle

            run_dir = str(open_bundle(run_dir, argv[argv.index("--runs-dir") + 1], unique=True))
        config = json.load(open(os.path.join(run_dir, "config.json"), encoding="utf-8"))
        last = 0
        for line in open(os.path.join(run_dir, "events.jsonl"), encoding="utf-8"):
            event = ev.decode(json.loads(line))
            if isinstance(event, ev.Checkpoint):
                last = event.step
        return train(config, run_dir, True, last)
    sys.stderr.write(f"unknown command {command}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
