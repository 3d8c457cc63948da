"""The sweep file: what it accepts, and every refusal as one line naming the key (exit 2)."""
from __future__ import annotations

import json
import re

import pytest

from gui_app.core.config import ConfigError
from gui_app.core.sweep_config import SweepConfig
from gui_app.engine.commands.cli import main as cli_main

BASE = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}, "strategy": {"name": "default"},
        "training": {"epochs": 3}}
ISSUE_EXAMPLE = {"base": BASE, "parameters": {"training.learning_rate": {"log_uniform": [1e-4, 1e-1]},
                                              "training.global_batch_size": {"choice": [32, 64, 128]},
                                              "training.epochs": {"int": [2, 10]}},
                 "metric": "val_accuracy", "direction": "maximize", "method": "tpe", "pruner": "hyperband",
                 "trials": 8, "parallel": 2}


def test_the_issue_example_loads_and_makes_trial_configs():
    sweep = SweepConfig.from_dict(ISSUE_EXAMPLE)
    assert [p.key for p in sweep.parameters] == list(ISSUE_EXAMPLE["parameters"])
    config = sweep.trial_config({"training.learning_rate": 0.01, "training.global_batch_size": 32,
                                 "training.epochs": 4})
    assert (config.training.learning_rate, config.training.global_batch_size, config.training.epochs) == (0.01, 32, 4)
    assert config.model.name == "mlp"  # the rest is the base's
    assert SweepConfig.from_dict(json.loads(sweep.to_json())) == sweep  # the folder's copy reads back the same


def test_defaults_and_the_grid():
    sweep = SweepConfig.from_dict({"base": BASE, "parameters": {
        "training.learning_rate": {"log_uniform": [1e-4, 1e-2]}, "training.epochs": {"int": [1, 9]},
        "training.optimizer": {"choice": ["adam", "sgd"]}}, "method": "grid", "trials": 100})
    assert (sweep.metric, sweep.direction, sweep.pruner, sweep.parallel) == ("val_accuracy", "maximize", "none", 1)
    space = sweep.grid_space()
    assert space["training.learning_rate"] == pytest.approx([1e-4, 1e-3, 1e-2])
    assert space["training.epochs"] == [1, 5, 9]
    assert space["training.optimizer"] == ["adam", "sgd"]
    assert sweep.trial_budget == 18  # the grid has fewer points than the 100 trials asked
    loss = SweepConfig.from_dict({"base": BASE, "parameters": {"training.epochs": {"int": [1, 2]}},
                                  "metric": "val_loss"})
    assert loss.direction == "minimize"


def _refused(tmp_path, capfd, data: dict, message: str) -> None:
    """The sweep file ``data`` is refused with ``message``: by the parser, and by ``sweep`` in one
    line on stderr with exit 2."""
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        SweepConfig.from_dict(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    assert cli_main(["sweep", str(path), "--sweeps-dir", str(tmp_path / "sweeps")]) == 2
    err = capfd.readouterr().err
    assert err.startswith(f"replica-studio sweep: {message}") and err.count("\n") == 1, err


@pytest.mark.parametrize("change, message", [
    ({"trails": 8}, "trails: unknown key"),
    ({"parameters": {"training.learning_rate": {"uniform": [0.01, 0.01]}}},
     "parameters.training.learning_rate.uniform: empty range"),
    ({"parameters": {"training.epochs": {"int": [5, 2]}}}, "parameters.training.epochs.int: empty range"),
    ({"parameters": {"training.learning_rate": {"log_uniform": [0, 0.1]}}},
     "parameters.training.learning_rate.log_uniform: a log range must lie above 0"),
    ({"parameters": {"training.optimizer": {"choice": ["adam", "adagrad"]}}},
     'parameters.training.optimizer.choice: "adagrad" is refused: training.optimizer: must be one of'),
    ({"parameters": {"training.learning_rate": {"uniform": [-1, 0.1]}}},
     "parameters.training.learning_rate.uniform: -1.0 is refused: training.learning_rate: must be > 0"),
    ({"parameters": {"training.lr": {"uniform": [0.1, 0.2]}}}, "parameters.training.lr: not a run configuration key"),
    ({"parameters": {"training.epochs": {"range": [1, 2]}}}, "parameters.training.epochs: must be one of"),
    ({"parameters": {}}, "parameters: must be an object with at least one key"),
    ({"metric": "accuracy"}, "metric: must be one of val_accuracy, val_loss, test_accuracy"),
    ({"method": "bayes"}, "method: must be one of tpe, random, grid"),
    ({"pruner": "asha"}, "pruner: must be one of none, median, hyperband"),
    ({"trials": 0}, "trials: must be an integer in [1, 10000]"),
    ({"parallel": 2.5}, "parallel: must be an integer in [1, 64]"),
    ({"time_limit": -3}, "time_limit: must be a number of seconds > 0"),
    ({"hosts": []}, 'hosts: must be a non-empty list of "local" (this machine) and SSH hosts'),
    ({"hosts": ["local", "local"]}, 'hosts: names a host twice: ["local", "local"]'),
    ({"hosts": ["local", "-oProxyCommand=x"]}, "hosts: an ssh destination (user@host or an alias) has no spaces"),
    ({"base": {**BASE, "training": {"epochs": 0}}}, "base.training.epochs: must be at least 1"),
    ({"base": {**BASE, "dataset": {"name": "digits", "validation": "none"}}},
     "metric: val_accuracy needs validation"),
])
def test_bad_sweep_files_exit_2_with_one_line_naming_the_key(tmp_path, capfd, change, message):
    data = {"base": BASE, "parameters": {"training.learning_rate": {"log_uniform": [1e-4, 1e-1]}}, **change}
    _refused(tmp_path, capfd, data, message)
    assert not (tmp_path / "sweeps").exists() or not any((tmp_path / "sweeps").iterdir())  # nothing made


def test_a_folder_that_is_not_a_sweep_exits_2(tmp_path, capfd):
    assert cli_main(["sweep", "status", str(tmp_path)]) == 2
    assert capfd.readouterr().err == f"replica-studio sweep status: sweep_dir: {tmp_path} is not a sweep folder " \
                                      f"(no sweep.json and study.json)\n"


def test_a_missing_or_broken_sweep_file_is_one_line(tmp_path, capfd):
    assert cli_main(["sweep", str(tmp_path / "none.json")]) == 2
    assert capfd.readouterr().err == f"replica-studio sweep: sweep: cannot read {tmp_path / 'none.json'}: " \
                                     "No such file or directory\n"
    (tmp_path / "broken.json").write_text('{"base": ')
    assert cli_main(["sweep", str(tmp_path / "broken.json")]) == 2
    assert capfd.readouterr().err.startswith("replica-studio sweep: sweep: not valid JSON")


SLURM_BASE = {**BASE, "strategy": {"name": "multi_worker_mirrored", "workers": 1}}


def test_a_slurm_sweep_and_the_threshold_pruner_load_and_read_back_the_same():
    sweep = SweepConfig.from_dict({"base": SLURM_BASE, "parameters": {"training.epochs": {"int": [1, 3]}},
                                   "pruner": "threshold", "pruner_threshold": 0.4,
                                   "slurm": {"partition": "gpu", "time": "1-02:00:00", "cpus_per_task": 8,
                                             "gpus_per_node": 1, "signal_seconds": 300,
                                             "sbatch": ["--qos=long", "--exclusive"]}})
    assert sweep.slurm is not None and (sweep.slurm.partition, sweep.slurm.gpus_per_node) == ("gpu", 1)
    assert sweep.slurm.sbatch == ("--qos=long", "--exclusive") and sweep.pruner_threshold == 0.4
    assert SweepConfig.from_dict(json.loads(sweep.to_json())) == sweep
    assert SweepConfig.from_dict({"base": SLURM_BASE, "parameters": {"training.epochs": {"int": [1, 3]}},
                                  "slurm": {}}).slurm is not None  # the cluster's defaults
    assert SweepConfig.from_dict({"base": BASE, "parameters": {"training.epochs": {"int": [1, 3]}}}).slurm is None


@pytest.mark.parametrize("change, message", [
    ({"slurm": {"partiton": "gpu"}}, "slurm.partiton: unknown key; did you mean 'partition'?"),
    ({"slurm": "gpu"}, 'slurm: must be an object of sbatch options (may be empty: {}) or null; got "gpu"'),
    ({"slurm": {"partition": "gpu a100"}}, 'slurm.partition: must be a partition name (no spaces) or null'),
    ({"slurm": {"time": "2 hours"}}, "slurm.time: must be Slurm's time format"),
    ({"slurm": {"cpus_per_task": 0}}, "slurm.cpus_per_task: must be an integer in [1, 4096] or null; got 0"),
    ({"slurm": {"gpus_per_node": True}}, "slurm.gpus_per_node: must be an integer in [0, 64] or null; got true"),
    ({"slurm": {"signal_seconds": -1}}, "slurm.signal_seconds: must be an integer in [0, 3600]"),
    ({"slurm": {"sbatch": ["qos=long"]}}, 'slurm.sbatch: must be a list of sbatch options, each "--name=value"'),
    ({"slurm": {"sbatch": ["--qos=long\n#SBATCH --x"]}}, "slurm.sbatch: must be a list of sbatch options"),
    ({"slurm": {}, "hosts": ["local", "gpu1"]}, "hosts: the trials run as Slurm jobs (slurm is set)"),
    ({"slurm": {}, "base": BASE}, 'base.strategy.name: trials as Slurm jobs run multi_worker_mirrored'),
    ({"slurm": {}, "gpus_per_trial": 2}, "gpus_per_trial: the trials run as Slurm jobs (slurm is set)"),
    ({"pruner": "threshold"}, "pruner_threshold: the threshold pruner needs the metric a trial must reach"),
    ({"pruner_threshold": 0.5}, 'pruner_threshold: only with "pruner": "threshold"; got pruner "none"'),
])
def test_bad_slurm_sweep_files_exit_2_with_one_line_naming_the_key(tmp_path, capfd, change, message):
    data = {"base": SLURM_BASE, "parameters": {"training.learning_rate": {"log_uniform": [1e-4, 1e-1]}}, **change}
    _refused(tmp_path, capfd, data, message)
    assert not (tmp_path / "sweeps").exists()
