"""The run configuration: defaults, JSON round trip and one clear error per bad value."""
from __future__ import annotations

import json

import pytest

from gui_app.core.config import ConfigError, RunConfig
from reference_run import REFERENCE  # the issue's example config



def test_issue_example_round_trips():
    config = RunConfig.from_dict(REFERENCE)
    assert config.strategy.devices == ("CPU:0", "CPU:1") and config.training.learning_rate == 0.001
    again = RunConfig.from_json(config.to_json())
    assert again == config
    assert json.loads(config.to_json())["strategy"]["devices"] == ["CPU:0", "CPU:1"]


def test_save_and_load(tmp_path):
    config = RunConfig().replace(training={"epochs": 3, "schedule": "cosine"}, dataset={"validation": "test"})
    config.save(tmp_path / "c.json")
    assert RunConfig.load(tmp_path / "c.json") == config


def test_device_names_are_normalised():
    config = RunConfig.from_dict({"strategy": {"devices": ["/device:cpu:0", "/job:localhost/replica:0/task:0/device:CPU:1"]},
                                  "runtime": {"cpu_devices": 2}})
    assert config.strategy.devices == ("CPU:0", "CPU:1")


@pytest.mark.parametrize("data, message", [
    ({"training": {"epochs": 0}}, "training.epochs: must be at least 1"),
    ({"training": {"learning_rate": -1}}, "training.learning_rate: must be > 0"),
    ({"training": {"learning_rate": 0}}, "training.learning_rate: must be > 0"),
    ({"training": {"optimizer": "lbfgs"}}, "training.optimizer: must be one of sgd, momentum, adam"),
    ({"training": {"steps_per_call": 0}}, "training.steps_per_call"),
    ({"training": {"epochs": 2.5}}, "training.epochs: must be an integer; got 2.5"),
    ({"training": {"mixed_precision": 1}}, "training.mixed_precision: must be true or false"),
    ({"training": {"epohcs": 2}}, "training.epohcs: unknown key"),
    ({"trainer": {}}, "trainer: unknown key"),
    ({"dataset": {"name": "imagenet"}}, "dataset.name: must be one of"),
    ({"dataset": {"name": "npz"}}, "dataset.path: dataset 'npz' needs a path"),
    ({"dataset": {"validation_split": 1.5}}, "dataset.validation_split: must be in [0, 1)"),
    ({"dataset": {"image_size": [32]}}, "dataset.image_size: must be a list of 2 values"),
    ({"model": {"name": "keras_file"}}, "model.path: model 'keras_file' needs"),
    ({"model": {"name": "keras_file", "path": "m.h5"}}, "model.path: must be a .keras file"),
    ({"strategy": {"devices": ["TPU:0"]}}, "strategy.devices: not a device name"),
    ({"strategy": {"devices": ["CPU:0", "CPU:0"]}}, "strategy.devices: lists a device twice"),
    ({"strategy": {"name": "one_device", "devices": ["CPU:0"]}}, "strategy.devices: only the mirrored"),
    ({"strategy": {"cross_device_ops": "magic"}}, "strategy.cross_device_ops: must be one of"),
    ({"strategy": {"devices": ["CPU:0", "CPU:1"]}}, "strategy.devices: CPU:1 does not exist"),
    ({"strategy": {"devices": ["CPU:0", "CPU:1", "CPU:2"]}, "runtime": {"cpu_devices": 3},
      "training": {"global_batch_size": 2}}, "training.global_batch_size: 2 is smaller than the 3 replicas"),
    ({"strategy": {"devices": ["CPU:0"]}, "training": {"mixed_precision": True}}, "training.mixed_precision: needs a GPU"),
    ({"runtime": {"cpu_devices": 0}}, "runtime.cpu_devices"),
    ([], "config: must be an object"),
])
def test_bad_values_name_their_key(data, message):
    with pytest.raises(ConfigError) as info:
        RunConfig.from_dict(data)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_invalid_json_is_a_config_error():
    with pytest.raises(ConfigError, match="not valid JSON"):
        RunConfig.from_json("{")
