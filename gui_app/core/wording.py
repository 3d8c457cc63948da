"""One wording for people: what each config key is called on the forms, how a run's strategy and
its example counts are told, in the window and on the command line alike.

The forms take their field labels from :data:`LABELS`, so a message can name a setting the way
the user sees it. Messages that both the window and the CLI show (the engine's one-line errors,
advice) name a setting with :func:`ref` -- the label, then the key in parentheses for the config
file's readers -- and the window shows them through :func:`for_people`, which leaves the label
only. Qt-free and TensorFlow-free.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

# The group box each section's fields are in, as the config panel titles it.
SECTIONS = {"dataset": "Dataset", "model": "Model", "strategy": "Strategy", "training": "Hyperparameters",
            "runtime": "Devices"}

# Each config key's field label. Keys without a field (set in a config file only) are not here.
LABELS = {
    "dataset.name": "Dataset", "dataset.path": "Path", "dataset.test_path": "Test images",
    "dataset.image_size": "Image size", "dataset.color_mode": "Colour", "dataset.label_offset": "Label offset",
    "dataset.tfds_name": "TFDS name", "dataset.data_dir": "TFDS folder", "dataset.loading": "Loading",
    "dataset.memory_budget_mb": "Memory budget", "dataset.cache": "Stream cache", "dataset.validation": "Validation",
    "dataset.validation_split": "Validation share", "dataset.test_split": "Test share",
    "model.name": "Model", "model.path": "File",
    "strategy.name": "Strategy", "strategy.device": "Device", "strategy.devices": "Replicas on",
    "strategy.cross_device_ops": "All-reduce", "strategy.all_reduce_dtype": "All-reduce in",
    "strategy.bytes_per_pack": "Pack size", "strategy.cluster": "Workers run on", "strategy.workers": "Workers",
    "strategy.ps": "Parameter servers", "strategy.communication": "Communication",
    "strategy.timeout_s": "Collective timeout (s)", "strategy.join_timeout_s": "Join timeout (s)",
    "strategy.max_restarts": "Restarts after a failure", "strategy.allow_public_hosts": "Allow public addresses",
    "training.epochs": "Epochs", "training.global_batch_size": "Global batch", "training.optimizer": "Optimizer",
    "training.learning_rate": "Learning rate", "training.momentum": "Momentum", "training.weight_decay": "Weight decay",
    "training.schedule": "Schedule", "training.warmup_steps": "Warm-up steps",
    "training.step_decay_epochs": "Decay every", "training.step_decay_rate": "Decay factor", "training.seed": "Seed",
    "training.steps_per_call": "Steps per call",
    "training.checkpoint_every_steps": "Checkpoint every", "training.accumulation_steps": "Accumulate",
    "training.mixed_precision": "Mixed precision",
    "runtime.cpu_devices": "CPU replicas", "runtime.gpu_memory_growth": "Allocate GPU memory as needed",
}

_KEY = r"(?:dataset|model|strategy|training|runtime)\.[a-z_]+"
_ASIDE = re.compile(rf" ?\((?:--set )?{_KEY}(?:=[^)]*)?\)")  # "(training.global_batch_size)", "(--set k=v)"
_COMMAND_CLAUSE = re.compile(r";\s*[^;()]*--set [^;()]*")  # "; resume with --set k=v": the command line's
_COMMAND_ASIDE = re.compile(r"\s*\([^()]*--set [^()]*\)")
_LEADING = re.compile(rf"^({_KEY}): ")
_ANYWHERE = re.compile(rf"(?<![\w.-]){_KEY}\b")


def label(key: str) -> str:
    """The form's label of ``key``; the key itself when no field shows it."""
    return LABELS.get(key, key)


def field(key: str) -> str:
    """``Dataset → Stream cache``: where a setting is on the forms, for advice."""
    section = SECTIONS.get(key.split(".", 1)[0])
    return f"{section} → {label(key)}" if key in LABELS and section else key


def ref(key: str) -> str:
    """``“Global batch” (training.global_batch_size)``: a setting named in a message both the
    window (through :func:`for_people`) and the command line show."""
    return f"“{label(key)}” ({key})" if key in LABELS else key


def for_people(text: str) -> str:
    """A message as the window shows it: the config keys it names become the form's labels
    (``training.learning_rate: must be > 0`` -> ``Learning rate: must be > 0``), and the asides
    written for the command line (``(training.global_batch_size)``, ``; resume with --set ...``) go."""
    text = _COMMAND_ASIDE.sub("", _COMMAND_CLAUSE.sub("", _ASIDE.sub("", text)))
    text = _LEADING.sub(lambda m: f"{label(m.group(1))}: " if m.group(1) in LABELS else m.group(0), text)
    return _ANYWHERE.sub(lambda m: f"“{LABELS[m.group(0)]}”" if m.group(0) in LABELS else m.group(0), text)


# ---- runs ---------------------------------------------------------------------------------------
def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 replica``, ``1,438 examples``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def example_counts(summary: dict[str, Any]) -> str:
    """``1,438 train / 359 test examples``, or with the validation hold-out a run reports
    (``run_started``): ``1,294 train + 144 validation / 359 test examples``."""
    train, test, val = (summary.get(k) for k in ("train_examples", "test_examples", "validation_examples"))
    if not isinstance(train, int) or not isinstance(test, int):
        return ""
    held_out = f" + {val:,} validation" if isinstance(val, int) and val else ""
    return f"{train:,} train{held_out} / {test:,} test examples"


def strategy_text(name: str, *, devices: Sequence[str] = (), workers: int = 0, ps: int = 0,
                  cluster: Any = None, device: str | None = None) -> str:
    """A strategy in one style for the run list and the command line: ``mirrored, 2 replicas
    (CPU:0, CPU:1)``, ``multi-worker, 2 workers``, ``parameter servers, 2 workers + 1 ps``."""
    devices = [str(d).split("device:")[-1] for d in devices]
    if name == "one_device":
        return f"one device ({device or 'automatic'})"
    if name == "mirrored":
        if not devices:
            return "mirrored (every GPU)"
        return f"mirrored, {count(len(devices), 'replica')} ({', '.join(devices)})"
    if name in ("multi_worker_mirrored", "parameter_server"):
        family = "multi-worker" if name == "multi_worker_mirrored" else "parameter servers"
        if isinstance(cluster, str):
            return f"{family} ({'Slurm' if cluster == 'slurm' else 'TF_CONFIG'})"
        if cluster:
            return f"{family}, {count(len(cluster), 'host')}"
        text = f"{family}, {count(workers, 'worker')}"
        return text + (f" + {ps} ps" if name == "parameter_server" and ps else "")
    return name


def describe_strategy(strategy: Any) -> str:
    """:func:`strategy_text` of a config's ``strategy`` section."""
    return strategy_text(strategy.name, devices=strategy.devices, workers=strategy.workers, ps=strategy.ps,
                         cluster=strategy.cluster, device=strategy.device)


def reduction(strategy_name: str | None) -> str:
    """What joins the replicas' gradients: the all-reduce, or the updates a parameter-server
    worker sends to the servers (nothing is all-reduced there)."""
    return "parameter-server updates" if strategy_name == "parameter_server" else "all-reduce"
