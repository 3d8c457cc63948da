"""The run event protocol of docs/events.md, in code: which event types exist and which keys
each must carry, with their JSON types.

The real engine (``train``/``resume``/``evaluate`` with ``--events jsonl``) and the test
suite's fake engine are both checked against it, so a UI test that passes with the fake
passes with the real engine. Readers ignore keys they do not know (new keys may be added,
none is renamed), so only required keys are listed here.
"""
from __future__ import annotations

from typing import Any

NUMBER = (int, float)
NULLABLE_NUMBER = (int, float, type(None))
TEXT = (str,)
NULLABLE_TEXT = (str, type(None))

# type -> {key: allowed JSON types}; every event also has "type" and "time".
EVENTS: dict[str, dict[str, tuple[type, ...]]] = {
    "run_started": {"run_dir": TEXT, "config": (dict,), "resumed": (bool,), "start_step": (int,),
                    "total_steps": (int,), "steps_per_epoch": (int,), "epochs": (int,), "num_replicas": (int,),
                    "replicas": (list,), "global_batch_size": (int,), "per_replica_batch_size": (int,),
                    "dataset": (dict,), "model": (dict,), "strategy": (dict,), "versions": (dict,)},
    "progress": {"stage": TEXT},
    "step": {"step": (int,), "epoch": (int,), "loss": NULLABLE_NUMBER, "accuracy": NULLABLE_NUMBER,
             "learning_rate": NULLABLE_NUMBER, "examples_per_sec": NULLABLE_NUMBER, "step_time": NULLABLE_NUMBER,
             "replicas": (list,)},
    "epoch_end": {"epoch": (int,), "step": (int,), "loss": NULLABLE_NUMBER, "accuracy": NULLABLE_NUMBER,
                  "val_loss": NULLABLE_NUMBER, "val_accuracy": NULLABLE_NUMBER, "duration": NULLABLE_NUMBER},
    "checkpoint": {"step": (int,), "path": TEXT},
    "paused": {"step": (int,)},
    "continued": {"step": (int,)},
    "eval": {"loss": NULLABLE_NUMBER, "accuracy": NULLABLE_NUMBER, "examples": (int,), "confusion_matrix": (list,),
             "class_names": (list,), "per_class": (list,), "examples_per_replica": (list,)},
    "warning": {"message": TEXT},
    "error": {"message": TEXT, "kind": TEXT},
    "run_finished": {"status": TEXT, "run_dir": NULLABLE_TEXT, "step": (int,)},
}
ERROR_KINDS = ("config", "input", "training", "disk", "cluster", "internal")
FINISHED_STATUSES = ("completed", "stopped", "failed")

# Each entry of a step event's "replicas" list.
REPLICA_ENTRY: dict[str, tuple[type, ...]] = {
    "replica": (int,), "device": TEXT, "loss": NULLABLE_NUMBER, "accuracy": NULLABLE_NUMBER, "examples": (int,),
    "grad_norm": NULLABLE_NUMBER, "step_time": NULLABLE_NUMBER, "examples_per_sec": NULLABLE_NUMBER,
    "memory_bytes": NULLABLE_NUMBER, "peak_memory_bytes": NULLABLE_NUMBER,
}

# Each entry of a step event's optional "gpus" list (gui_app.core.gpu_monitor.GpuSample): present
# only where NVML sees NVIDIA GPUs; a figure the card does not report is null.
GPU_ENTRY: dict[str, tuple[type, ...]] = {
    "index": (int,), "name": TEXT, "utilization": NULLABLE_NUMBER, "memory_used": NULLABLE_NUMBER,
    "memory_total": NULLABLE_NUMBER, "temperature": NULLABLE_NUMBER, "power": NULLABLE_NUMBER,
}


def _check_keys(where: str, value: dict, keys: dict[str, tuple[type, ...]]) -> list[str]:
    problems = []
    for key, types in keys.items():
        if key not in value:
            problems.append(f"{where}: missing {key!r}")
        elif isinstance(value[key], bool) and bool not in types:  # JSON true is not a number
            problems.append(f"{where}: {key!r} is a boolean")
        elif not isinstance(value[key], types):
            problems.append(f"{where}: {key!r} is {type(value[key]).__name__}")
    return problems


def event_problems(event: Any) -> list[str]:
    """What is wrong with one event (empty when it follows the protocol)."""
    if not isinstance(event, dict):
        return [f"not a JSON object: {event!r:.60}"]
    kind = event.get("type")
    if kind not in EVENTS:
        return [f"unknown event type {kind!r}"]
    problems = _check_keys(kind, event, {"time": NUMBER, **EVENTS[kind]})
    if kind == "error" and event.get("kind") not in ERROR_KINDS:
        problems.append(f"error: kind must be one of {ERROR_KINDS}")
    if kind == "run_finished" and event.get("status") not in FINISHED_STATUSES:
        problems.append(f"run_finished: status must be one of {FINISHED_STATUSES}")
    if kind == "run_finished" and event.get("status") == "failed" and not event.get("message"):
        problems.append("run_finished: a failed run says why in 'message'")
    if kind == "step" and isinstance(event.get("replicas"), list):
        for i, entry in enumerate(event["replicas"]):
            if not isinstance(entry, dict):
                problems.append(f"step {event.get('step')}: replicas[{i}] is not an object")
            else:
                problems += _check_keys(f"step {event.get('step')} replicas[{i}]", entry, REPLICA_ENTRY)
    if kind == "step" and "gpus" in event:
        if not isinstance(event["gpus"], list):
            problems.append(f"step {event.get('step')}: 'gpus' is not a list")
        else:
            for i, entry in enumerate(event["gpus"]):
                if not isinstance(entry, dict):
                    problems.append(f"step {event.get('step')}: gpus[{i}] is not an object")
                else:
                    problems += _check_keys(f"step {event.get('step')} gpus[{i}]", entry, GPU_ENTRY)
    return problems


def stream_problems(events: list[dict]) -> list[str]:
    """Problems of one process's events: each event's, and the order rules (``run_finished``
    is the last event; steps increase within a process)."""
    problems = [p for event in events for p in event_problems(event)]
    kinds = [e.get("type") for e in events if isinstance(e, dict)]
    if "run_finished" in kinds and kinds.index("run_finished") != len(kinds) - 1:
        problems.append("run_finished is not the last event")
    steps = [e["step"] for e in events if isinstance(e, dict) and e.get("type") == "step" and "step" in e]
    if any(b <= a for a, b in zip(steps, steps[1:])):
        problems.append("step numbers do not increase")
    return problems
