"""The run configuration: defaults, JSON round trip and one clear error per bad value."""
from __future__ import annotations

import json

import pytest
from reference_run import REFERENCE  # the issue's example config

from gui_app.core.config import ConfigError, RunConfig


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
    config = RunConfig.from_dict({"strategy": {"devices": ["/device:cpu:0",
                                                       "/job:localhost/replica:0/task:0/device:CPU:1"]},
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
    ({"strategy": {"devices": ["CPU:0"]}, "training": {"mixed_precision": True}},
     "training.mixed_precision: needs a GPU"),
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


MWMS = {"name": "multi_worker_mirrored", "workers": 2}


@pytest.mark.parametrize("data, message", [
    ({"strategy": {"all_reduce_dtype": "int8"}},
     "strategy.all_reduce_dtype: must be one of float32, float16; got \"int8\""),
    ({"strategy": {"name": "one_device", "all_reduce_dtype": "float16"}},
     "strategy.all_reduce_dtype: only mirrored and multi_worker_mirrored all-reduce gradients, not 'one_device'"),
    ({"strategy": {"name": "parameter_server", "workers": 2, "ps": 1, "all_reduce_dtype": "float16"}},
     "strategy.all_reduce_dtype: only mirrored and multi_worker_mirrored"),
    ({"strategy": {"bytes_per_pack": 65536}},
     "strategy.bytes_per_pack: only multi_worker_mirrored packs its all-reduce"),
    ({"strategy": {**MWMS, "bytes_per_pack": -1}},
     "strategy.bytes_per_pack: must be in [0, 1073741824] (1 GiB); got -1"),
    ({"strategy": {**MWMS, "bytes_per_pack": 2**31}}, "strategy.bytes_per_pack: must be in [0, 1073741824]"),
    ({"strategy": {**MWMS, "bytes_per_pack": 1.5}}, "strategy.bytes_per_pack: must be an integer"),
    ({"training": {"accumulation_steps": 0}}, "training.accumulation_steps: must be in [1, 64]; got 0"),
    ({"training": {"accumulation_steps": 65}}, "training.accumulation_steps: must be in [1, 64]; got 65"),
    ({"training": {"accumulation_steps": 8, "global_batch_size": 4}},
     "training.accumulation_steps: 8 micro-batches do not fit the global batch of 4"),
    ({"strategy": {"devices": ["CPU:0", "CPU:1"]}, "runtime": {"cpu_devices": 2},
      "training": {"accumulation_steps": 8, "global_batch_size": 12}},
     "training.accumulation_steps: 8 micro-batches do not fit the 6 examples per replica"),
    ({"strategy": {"name": "parameter_server", "workers": 2, "ps": 1}, "training": {"accumulation_steps": 2}},
     "training.accumulation_steps: parameter_server workers update the variables after every batch"),
])
def test_communication_options_name_their_key(data, message):
    with pytest.raises(ConfigError) as info:
        RunConfig.from_dict(data)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_communication_options_where_they_apply():
    mwms = RunConfig.from_dict({"strategy": {**MWMS, "bytes_per_pack": 65536, "all_reduce_dtype": "float16"},
                                "training": {"accumulation_steps": 4}})
    assert mwms.strategy.bytes_per_pack == 65536 and mwms.training.accumulation_steps == 4
    assert RunConfig.from_json(mwms.to_json()) == mwms
    mirrored = RunConfig.from_dict({"strategy": {"devices": ["CPU:0", "CPU:1"], "all_reduce_dtype": "float16"},
                                    "runtime": {"cpu_devices": 2}, "training": {"accumulation_steps": 32}})
    assert mirrored.strategy.all_reduce_dtype == "float16"  # 32 micro-batches of one example each
    defaults = RunConfig()
    assert (defaults.strategy.all_reduce_dtype, defaults.strategy.bytes_per_pack,
            defaults.training.accumulation_steps) == ("float32", 0, 1)
