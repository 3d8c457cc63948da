"""When the replicas wait for their batch, whether that is the input at all: a 2-worker run on
the bundled digits (in memory) on two shared cores was told to cache the set and convert it to
TFRecord shards -- its wait is the workers competing for the cores."""
from __future__ import annotations

from gui_app.core.bottleneck import CpuShare, bottleneck, input_wait_line
from gui_app.core.events import ReplicaInfo, RunStarted


def _run(strategy: dict, devices: list[tuple[int, str]], cores: int | None = 2, streamed: bool = False) -> RunStarted:
    dataset = {"name": "digits", "input_shape": [8, 8, 1], **({"streamed": True} if streamed else {})}
    return RunStarted(run_dir="/runs/r", config={"strategy": strategy}, num_replicas=len(devices),
                      num_workers=max(w for w, _ in devices) + 1, dataset=dataset, cpu_cores=cores,
                      replicas=[ReplicaInfo(replica=i, worker=w, device=d) for i, (w, d) in enumerate(devices)])


TWO_WORKERS = {"name": "multi_worker_mirrored", "workers": 2, "cluster": None}
WORKER_CPUS = [(0, "/job:worker/replica:0/task:0/device:CPU:0"), (1, "/job:worker/replica:0/task:1/device:CPU:0")]


def test_two_local_workers_on_in_memory_digits_contend_for_the_cores():
    cpu = CpuShare.of_run(_run(TWO_WORKERS, WORKER_CPUS))
    assert cpu == CpuShare(in_memory=True, workers=2, ps=0, cpu_replicas=1, cores=2)
    line = input_wait_line(0.45, cpu, [8, 8, 1])
    assert line.startswith("the replicas waited 45% of the time for their batch, but the examples are in memory: "
                           "the cores are shared (2 workers × 2 threads each on 2 cores), so this is CPU contention, "
                           "not input. Try: fewer workers on this machine")
    assert "input-bound" not in line and "TFRecord" not in line and "in memory (" not in line
    split = bottleneck(0.3, 0.5, 0.2, 2, "multi_worker_mirrored", [8, 8, 1], cpu)
    assert "CPU contention (2 workers × 2 threads each on 2 cores), not input" in split and "TFRecord" not in split


def test_parameter_servers_on_the_same_cores_count_too():
    ps = {"name": "parameter_server", "workers": 2, "ps": 1, "cluster": None}
    cpu = CpuShare.of_run(_run(ps, [(0, "/job:worker/task:0/device:CPU:0")], cores=4))
    assert cpu.contention()[0] == "2 workers and 1 parameter server × 4 threads each on 4 cores"


def test_two_cpu_replicas_on_two_cores_contend_but_not_on_eight():
    mirrored = {"name": "mirrored", "devices": ["CPU:0", "CPU:1"]}
    replicas = [(0, f"/job:localhost/replica:0/task:0/device:CPU:{i}") for i in range(2)]
    shared = CpuShare.of_run(_run(mirrored, replicas, cores=2)).contention()
    assert shared is not None and shared[0] == "2 CPU replicas on 2 cores" and "CPU replicas" in shared[1]
    assert CpuShare.of_run(_run(mirrored, replicas, cores=8)).contention() is None


def test_input_read_from_files_or_workers_on_other_hosts_keep_the_input_advice():
    streamed = CpuShare.of_run(_run(TWO_WORKERS, WORKER_CPUS, streamed=True))
    assert streamed.contention() is None
    assert input_wait_line(0.45, streamed).startswith("input-bound: the replicas waited 45% of the time for data. "
                                                      "Try: keep the decoded examples in memory")
    hosts = {**TWO_WORKERS, "cluster": ["node1:2222", "node2:2222"]}  # each worker may have cores of its own
    assert CpuShare.of_run(_run(hosts, WORKER_CPUS)).contention() is None
    unknown = CpuShare.of_run(_run(TWO_WORKERS, WORKER_CPUS, cores=None))  # a run written before cpu_cores
    assert input_wait_line(0.45, unknown).startswith("input-bound:")


def test_one_device_waiting_for_in_memory_examples_is_not_told_to_cache_them():
    one = CpuShare.of_run(_run({"name": "one_device", "device": "CPU:0"},
                               [(0, "/job:localhost/replica:0/task:0/device:CPU:0")], cores=2))
    assert one.contention() is None
    line = input_wait_line(0.3, one)
    assert line.startswith("the replicas waited 30% of the time for their batch; the examples are in memory already")
    assert "TFRecord" not in line and "larger global batch" in line
