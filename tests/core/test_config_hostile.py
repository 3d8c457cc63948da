"""Hostile configs: every parser failure is a ConfigError naming the key or the file."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gui_app.core.config import ConfigError, RunConfig


@pytest.mark.parametrize("text, message", [
    ('{"training": {"learning_rate": Infinity}}', "training.learning_rate: must be a finite number; got Infinity"),
    ('{"training": {"learning_rate": 1e400}}', "training.learning_rate: must be a finite number; got Infinity"),
    ('{"training": {"weight_decay": NaN}}', "training.weight_decay: must be a finite number; got NaN"),
    ('{"training": {"epochs": 1000000000000000000000000000000}}', "training.epochs: must be at most 100,000"),
    ('{"training": {"global_batch_size": 10000000}}', "training.global_batch_size: must be at most 65,536"),
    ('{"dataset": {"image_size": [99999, 32]}}', "dataset.image_size: must be [height, width] between 8 and 1024"),
    ('{"runtime": {"cpu_devices": 1000}}', "runtime.cpu_devices: must be in [1, 64]"),
    ('{"training": {"learning_rate": ' + "9" * 5000 + "}}", "config: Exceeds the limit"),
    ('{"training": {"learning_rate": ' + "9" * 400 + "}}", "training.learning_rate: must be a finite number"),
    ("[" * 5000 + "]" * 5000, "config: nested too deeply"),
    ('{"a\\nb": 1}', '"a\\nb": unknown key'),
])
def test_hostile_values_name_the_key(text, message):
    with pytest.raises(ConfigError) as info:
        RunConfig.from_json(text)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_file_encodings(tmp_path):
    bad = tmp_path / "latin1.json"
    bad.write_bytes('{"dataset": {"name": "caf\xe9"}}'.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1.json is not UTF-8 text \(byte 25\)"):
        RunConfig.load(bad)
    bom = tmp_path / "bom.json"  # Windows Notepad's UTF-8 starts with a byte-order mark: accepted
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps({"training": {"epochs": 2}}).encode())
    assert RunConfig.load(bom).training.epochs == 2
    huge = tmp_path / "huge.json"
    huge.write_bytes(b" " * (2 << 20) + b"{}")
    with pytest.raises(ConfigError, match="a run configuration is at most"):
        RunConfig.load(huge)


def test_nan_is_refused_even_when_built_directly():
    from gui_app.core.config import TrainingConfig

    with pytest.raises(ConfigError, match="training.momentum: must be a finite number"):
        TrainingConfig(momentum=float("nan"))


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20)
_sections = st.fixed_dictionaries({}, optional={
    "dataset": st.dictionaries(st.sampled_from(["name", "path", "image_size", "validation_split", "validation",
                                                "test_split", "color_mode", "max_image_pixels"]), _json, max_size=3),
    "training": st.dictionaries(st.sampled_from(["epochs", "global_batch_size", "learning_rate", "optimizer",
                                                 "momentum", "weight_decay", "seed", "steps_per_call",
                                                 "checkpoint_every_minutes", "keep_checkpoints"]), _json, max_size=3),
    "strategy": st.dictionaries(st.sampled_from(["name", "devices", "device", "cross_device_ops"]), _json, max_size=2),
    "runtime": st.dictionaries(st.sampled_from(["cpu_devices", "gpu_memory_growth"]), _json, max_size=2),
    "model": st.dictionaries(st.sampled_from(["name", "path"]), _json, max_size=2),
})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_json, _sections))
def test_random_json_gives_a_config_or_a_config_error(data):
    text = json.dumps(data)  # NaN and Infinity included, as Python's json writes them
    try:
        config = RunConfig.from_json(text)
    except ConfigError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert RunConfig.from_json(config.to_json()) == config  # what loads is a valid, round-tripping config
