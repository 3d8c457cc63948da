"""``resume --set training.learning_rate=0.0005``: change a stopped or failed run's config before
it continues, within what its checkpoint can still restore.

Only keys that leave the model and the optimizer's variables as they are may change (a new
optimizer has other slots, mixed precision wraps it, a new dataset or model is another run).
Values are JSON (``0.0005``, ``true``, ``"cosine"``); a bare word is taken as a string.
The result is validated like any config. A sweep's trials are made the same way, from any key
(:func:`set_keys`). TensorFlow-free.
"""
from __future__ import annotations

import json
from typing import Any

from gui_app.core.config import ConfigError, RunConfig

RESUME_OVERRIDABLE = frozenset(f"training.{key}" for key in (
    "epochs", "global_batch_size", "learning_rate", "momentum", "weight_decay", "schedule", "warmup_steps",
    "step_decay_epochs", "step_decay_rate", "steps_per_call", "checkpoint_every_steps",
    "checkpoint_every_minutes", "keep_checkpoints", "accumulation_steps"))


def parse_override(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set: expected KEY=VALUE like training.learning_rate=0.0005; got {text[:60]!r}")
    if key not in RESUME_OVERRIDABLE:
        raise ConfigError(f"--set {key}: cannot change on resume (the checkpoint holds the model and optimizer "
                          f"it describes); changeable: {', '.join(sorted(RESUME_OVERRIDABLE))}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw.strip()
    return key, value


def apply_overrides(config: RunConfig, overrides: list[str]) -> RunConfig:
    return set_keys(config, dict(parse_override(text) for text in overrides))


def config_keys() -> frozenset[str]:
    """Every dotted key a run configuration has (``training.learning_rate``, ``strategy.devices``)."""
    return frozenset(flatten(RunConfig().to_dict()))


def flatten(data: dict[str, Any]) -> dict[str, Any]:
    """A run configuration's JSON as ``{"section.key": value}``."""
    return {f"{section}.{name}": value for section, values in data.items() for name, value in values.items()}


def set_keys(config: RunConfig, values: dict[str, Any]) -> RunConfig:
    """``config`` with the dotted keys of ``values`` set, validated (:class:`ConfigError` names the key)."""
    data = config.to_dict()
    for key, value in values.items():
        section, name = key.split(".", 1)
        data[section][name] = value
    return RunConfig.from_dict(data)
