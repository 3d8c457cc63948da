"""What to try when one part of a training step dominates its time: the wait for input, or the
all-reduce (the parameter servers' updates) and the optimizer (the parts of ``Step.time_split``).
Worded once for the Training tab's input-bound line, the Replicas tab's step split and the
scaling report's recommendation, naming settings as the forms label them (gui_app.core.wording).
TensorFlow-free.

A wait for a batch is not always the input's fault. When the examples are already decoded in
memory and several training processes (or CPU replicas) share a machine's cores, the batch is
late because its pipeline threads wait for a core: every TensorFlow process sizes its thread
pools to all the cores, so N workers run N x C threads on C cores. Then the input advice (cache
the set, convert it to TFRecord) changes nothing; :class:`CpuShare` says what is true instead.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from gui_app.core import wording
from gui_app.core.events import RunStarted

SMALL_IMAGE_PIXELS = 64 * 64  # decoding images this small is cheap: smaller ones would not help


def input_advice(input_shape: Sequence[int] | None = None) -> str:
    """What to try when the replicas wait for input; smaller images only when they are not
    small already (8x8 digits were told to use smaller images)."""
    tips = [f"keep the decoded examples in memory ({wording.field('dataset.cache')})", "decode on more CPU cores",
            "convert the set to TFRecord shards (Tools → Prepare dataset, or replica-studio prepare)"]
    if input_shape and len(input_shape) >= 2 and input_shape[0] * input_shape[1] > SMALL_IMAGE_PIXELS:
        tips.insert(2, f"train on smaller images ({wording.field('dataset.image_size')})")
    return ", ".join(tips[:-1]) + ", or " + tips[-1]


INPUT_ADVICE = input_advice()  # where the images' size is not known
WORKERS_ADVICE = ("fewer workers on this machine (the replicas of one worker share one thread pool), "
                  "workers on machines of their own, or one device")
REPLICAS_ADVICE = f"fewer CPU replicas ({wording.field('runtime.cpu_devices')}: one device is faster on shared cores)"
IN_MEMORY_ADVICE = (f"the examples are in memory already: the per-batch work (shuffling, batching) or another "
                    f"program on these cores holds the batch up; try a larger global batch "
                    f"({wording.field('training.global_batch_size')})")


def usable_cores() -> int:
    """The cores this process may run on (its affinity: a container's or taskset's share)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class CpuShare:
    """How a run's training shares the cores of its machine, from its ``run_started``."""

    in_memory: bool = False  # the examples are decoded arrays in memory, not read from files
    workers: int = 1  # training processes on this machine's cores (local workers)
    ps: int = 0  # and local parameter servers
    cpu_replicas: int = 0  # replicas on CPU devices in each process
    cores: int | None = None  # the cores the processes may use; None: not known (older runs)

    @classmethod
    def of_run(cls, run: RunStarted) -> CpuShare:
        strategy = (run.config or {}).get("strategy") or {}
        workers, ps = 1, 0
        if strategy.get("cluster") is None and strategy.get("name") in ("multi_worker_mirrored", "parameter_server"):
            # Local workers (and parameter servers) on 127.0.0.1: all on the chief's cores. A
            # cluster of hosts or a scheduler's nodes may have cores of their own: not assumed.
            workers, ps = max(1, int(strategy.get("workers") or run.num_workers or 1)), int(strategy.get("ps") or 0)
        per_process = [r for r in run.replicas if r.worker == 0] or run.replicas
        cpu_replicas = sum(1 for r in per_process if "CPU" in r.device.upper())
        return cls(in_memory=not (run.dataset or {}).get("streamed"), workers=workers, ps=ps,
                   cpu_replicas=cpu_replicas, cores=run.cpu_cores)

    def contention(self) -> tuple[str, str] | None:
        """(``2 workers × 2 threads each on 2 cores``, what to try) when a wait for in-memory
        input is the processes (or replicas) competing for the cores; None when it may be input."""
        if not self.in_memory or not self.cores:
            return None
        cores = wording.count(self.cores, "core")
        if self.workers + self.ps > 1:
            ps = f" and {wording.count(self.ps, 'parameter server')}" if self.ps else ""
            return f"{wording.count(self.workers, 'worker')}{ps} × {self.cores} threads each on {cores}", WORKERS_ADVICE
        if self.cpu_replicas > 1 and self.cpu_replicas >= self.cores:  # a core or less per replica
            return f"{self.cpu_replicas} CPU replicas on {cores}", REPLICAS_ADVICE
        return None


def input_wait_line(share: float, cpu: CpuShare | None = None, input_shape: Sequence[int] | None = None) -> str:
    """The Training tab's line when the replicas waited ``share`` of the time for their batch."""
    shared = cpu.contention() if cpu else None
    if shared:
        return (f"the replicas waited {share:.0%} of the time for their batch, but the examples are in memory: "
                f"the cores are shared ({shared[0]}), so this is CPU contention, not input. Try: {shared[1]}.")
    if cpu is not None and cpu.in_memory and cpu.cores:
        return f"the replicas waited {share:.0%} of the time for their batch; {IN_MEMORY_ADVICE}."
    return f"input-bound: the replicas waited {share:.0%} of the time for data. Try: {input_advice(input_shape)}."


ALL_REDUCE_ADVICE = (f"try a larger global batch ({wording.field('training.accumulation_steps')} keeps its "
                     f"memory that of a micro-batch), the all-reduce in float16 "
                     f"({wording.field('strategy.all_reduce_dtype')}), NCCL on GPUs, or fewer replicas")
UPDATES_ADVICE = (f"try a larger global batch (fewer updates per example), more parameter servers "
                  f"({wording.field('strategy.ps')}), or fewer workers")


def bottleneck(compute: float, waited: float, rest: float, replicas: int, strategy: str | None = None,
               input_shape: Sequence[int] | None = None, cpu: CpuShare | None = None) -> str | None:
    """What to try when one part dominates the step, or None when nothing stands out. Under
    parameter servers the rest of a step is the worker's updates to the servers, not an all-reduce;
    a wait for in-memory input on shared cores is CPU contention (``cpu``), not input."""
    total = compute + waited + rest
    if total <= 0:
        return None
    if waited / total > 0.3:
        shared = cpu.contention() if cpu else None
        if shared:
            return (f"the wait for the batch is {waited / total:.0%} of the step, with the examples in memory: "
                    f"CPU contention ({shared[0]}), not input: try {shared[1]}")
        if cpu is not None and cpu.in_memory and cpu.cores:
            return f"the wait for the batch is {waited / total:.0%} of the step: {IN_MEMORY_ADVICE}"
        return f"input is {waited / total:.0%} of the step: {input_advice(input_shape)}"
    if replicas > 1 and rest / total > 0.4:
        advice = UPDATES_ADVICE if strategy == "parameter_server" else ALL_REDUCE_ADVICE
        return f"{wording.reduction(strategy)} and optimizer are {rest / total:.0%} of the step: {advice}"
    return None
