"""The multi-worker keys of the strategy section (no TensorFlow)."""
from __future__ import annotations

import json

import pytest

from gui_app.core.cluster_addresses import SshWorker, check_hosts, is_private_host, split_host
from gui_app.core.config import ConfigError, RunConfig


def _strategy(**keys):
    return RunConfig.from_dict({"strategy": keys}).strategy


def test_round_trip_of_a_cluster_list_and_a_resolver():
    config = RunConfig.from_dict({"strategy": {"name": "multi_worker_mirrored",
                                               "cluster": ["10.0.0.1:2222", "node2:2222"], "timeout_s": 90}})
    assert config.strategy.cluster == ("10.0.0.1:2222", "node2:2222")
    assert RunConfig.from_json(config.to_json()) == config
    assert _strategy(name="parameter_server", cluster="tf_config").cluster == "tf_config"


@pytest.mark.parametrize("keys, message", [
    ({"name": "multi_worker_mirrored"}, "strategy.workers: multi_worker_mirrored needs at least 1 worker"),
    ({"name": "mirrored", "workers": 2}, "strategy.workers: only multi_worker_mirrored and parameter_server"),
    ({"name": "parameter_server", "workers": 2}, "strategy.ps: parameter_server needs at least 1"),
    ({"name": "multi_worker_mirrored", "workers": 2, "ps": 1}, "strategy.ps: only parameter_server"),
    ({"name": "multi_worker_mirrored", "cluster": "yarn"}, "strategy.cluster: must be one of tf_config, slurm"),
    ({"name": "multi_worker_mirrored", "cluster": ["8.8.8.8:2222"]}, "strategy.cluster: 8.8.8.8 is not a loopback"),
    ({"name": "multi_worker_mirrored", "cluster": ["a:1", "a:1"]}, "strategy.cluster: lists a:1 twice"),
    ({"name": "multi_worker_mirrored", "cluster": ["a:99999"]}, "the port must be a number from 1 to 65535"),
    ({"name": "multi_worker_mirrored", "cluster": ["a:1"], "workers": 2}, "strategy.workers: is 2 but"),
    ({"name": "multi_worker_mirrored", "workers": 2, "communication": "mpi"}, "strategy.communication: must be"),
    ({"name": "multi_worker_mirrored", "workers": 2, "timeout_s": 0}, "strategy.timeout_s: must be > 0"),
    ({"name": "multi_worker_mirrored", "workers": 2, "max_restarts": -1}, "strategy.max_restarts"),
    ({"name": "multi_worker_mirrored", "cluster": 3}, "strategy.cluster: must be a string or a list"),
    # SSH hosts, whose workers train starts itself
    ({"name": "multi_worker_mirrored", "cluster": [{"host": "gpu2", "port": 2222}]},
     "strategy.cluster: entry 0 is this machine (the chief, which writes the run directory): give it as \"host:port\""),
    ({"name": "multi_worker_mirrored", "cluster": ["a:1", {"host": "gpu2", "port": 2222}, "b:1"]},
     "strategy.cluster: entry 2 ('b:1') is a worker started by hand, but the list names SSH hosts"),
    ({"name": "multi_worker_mirrored", "cluster": ["a:1", {"host": "gpu2"}]},
     "strategy.cluster: entry 1: port: the TensorFlow gRPC port there, 1 to 65535; got none"),
    ({"name": "multi_worker_mirrored", "cluster": ["a:1", {"host": "gpu2", "port": 0x10000}]}, "got 65536"),
    ({"name": "multi_worker_mirrored", "cluster": ["a:1", {"port": 1}]}, "strategy.cluster: entry 1: host: must be"),
    ({"name": "multi_worker_mirrored", "cluster": ["a:1", {"host": "-oProxyCommand=x", "port": 1}]},
     "strategy.cluster: entry 1: host: an ssh destination (user@host or an alias) has no spaces"),
    ({"name": "multi_worker_mirrored", "cluster": ["a:1", {"host": "gpu2", "port": "22"}]},
     "strategy.cluster.port: must be an integer"),
    ({"name": "multi_worker_mirrored", "cluster": ["a:1", {"host": "gpu2", "port": 2, "user": "x"}]},
     "strategy.cluster.user: unknown key (known keys: host, port)"),
    ({"name": "multi_worker_mirrored", "cluster": ["a:1", {"host": "g", "port": 2}, {"host": "g", "port": 2}]},
     "strategy.cluster: lists g port 2 twice"),
    ({"name": "multi_worker_mirrored", "cluster": ["a:1", 7]}, "strategy.cluster: must be a string or an object"),
])
def test_bad_multi_worker_keys_name_the_key(keys, message):
    with pytest.raises(ConfigError) as info:
        _strategy(**keys)
    assert message in str(info.value)


def test_round_trip_of_a_cluster_of_ssh_hosts():
    config = RunConfig.from_dict({"strategy": {"name": "multi_worker_mirrored", "cluster": [
        "10.0.0.1:2222", {"host": "me@gpu2", "port": 2222}, {"host": "gpu3", "port": 2222}]}, "training": {"seed": 1}})
    assert config.strategy.cluster == ("10.0.0.1:2222", SshWorker("me@gpu2", 2222), SshWorker("gpu3", 2222))
    assert config.to_dict()["strategy"]["cluster"][1] == {"host": "me@gpu2", "port": 2222}
    assert RunConfig.from_json(config.to_json()) == config


def test_public_hosts_pass_only_when_allowed_and_several_hosts_need_a_seed():
    assert _strategy(name="multi_worker_mirrored", cluster=["8.8.8.8:2222"], allow_public_hosts=True)
    with pytest.raises(ConfigError, match="training.seed: a cluster of several hosts needs a seed"):
        RunConfig.from_dict({"strategy": {"name": "multi_worker_mirrored", "cluster": ["10.0.0.1:1", "10.0.0.2:1"]},
                             "training": {"seed": None}})


def test_host_helpers():
    assert split_host("[fd00::1]:2222") == ("fd00::1", 2222)
    assert [is_private_host(h) for h in ("127.0.0.1", "192.168.3.4", "fd00::1", "node7", "gpu1.lan", "8.8.8.8",
                                         "example.com")] == [True, True, True, True, True, False, False]
    with pytest.raises(ValueError, match="is not host:port"):
        check_hosts(("nohost",), False)
    json.dumps(_strategy(name="multi_worker_mirrored", workers=2).__dict__)  # plain JSON values
