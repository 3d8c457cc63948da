"""The one rule for how a global batch splits over the replicas of a run.

``train``, ``worker``, ``submit`` and the window's strategy form all ask :func:`batch_split`, so a
config gets the same answer, in the same words, wherever it is checked. What TensorFlow really
allows (TF 2.21):

- One process (``mirrored``, or ``multi_worker_mirrored`` with one worker): an uneven split
  works. The input is distributed whole with ``experimental_distribute_dataset``, which gives the
  first replicas one example more (``engine/training/pipeline.py``). A warning, not an error.
- Several workers: each reads its own shard through ``distribute_datasets_from_function``, whose
  ``InputContext.get_per_replica_batch_size`` raises "The `global_batch_size` 10 is not divisible
  by `num_replicas_in_sync` 3". An error, said before the cluster forms.
- ``parameter_server``: each step is one worker's whole batch; nothing is split.

Qt-free and TensorFlow-free.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gui_app.core.config_json import ConfigError
from gui_app.core.wording import count

BATCH_KEY = "training.global_batch_size"
ACCUMULATION_KEY = "training.accumulation_steps"


@dataclass(frozen=True)
class BatchSplit:
    """The rule's answer: ``error`` (the run cannot start) or ``warning`` (it can), each
    ``"key: message"``; both None for an even split."""
    error: str | None = None
    warning: str | None = None

    @property
    def message(self) -> str:
        """The error, else the warning, else ''."""
        return self.error or self.warning or ""

    def warnings(self) -> list[str]:
        """The warning as a list for a run's warnings; ConfigError when the run cannot start."""
        if self.error:
            raise ConfigError(self.error)
        return [self.warning] if self.warning else []


def batch_split(strategy: str, batch: int, replicas: int, workers: int = 1, accumulation: int = 1) -> BatchSplit:
    """How ``batch`` examples split over ``replicas`` replicas in ``workers`` worker processes,
    with ``accumulation`` micro-batches per replica."""
    if strategy == "parameter_server" or replicas < 1:
        return BatchSplit()
    if batch < replicas:
        return BatchSplit(error=f"{BATCH_KEY}: {batch} is smaller than the {replicas} replicas")
    per_replica = batch // replicas
    if per_replica < accumulation:
        return BatchSplit(error=f"{ACCUMULATION_KEY}: {accumulation} micro-batches do not fit the {per_replica} "
                                "examples per replica")
    if not batch % replicas:
        return BatchSplit()
    low = batch - batch % replicas
    said = (f"{BATCH_KEY}: {batch} does not divide evenly over {replicas} replicas: {split_text(batch, replicas)}. "
            f"Try {low} or {low + replicas}.")
    if workers > 1:
        return BatchSplit(error=f"{said} A cluster of {workers} workers needs an even split (each worker "
                                "reads its own shard of the batch).")
    return BatchSplit(warning=said)


# ``config`` is a gui_app.core.config.RunConfig; not imported, as config.py asks this module.
def config_split(config: Any, replicas: int, workers: int = 1) -> BatchSplit:
    """:func:`batch_split` for a run config once the replicas and workers are known."""
    return batch_split(config.strategy.name, config.training.global_batch_size, replicas, workers,
                       config.training.accumulation_steps)


def scheduled_split(config: Any, workers: int, gpus_per_worker: int | None) -> BatchSplit:
    """A submitted run's split, said before the job is queued: each worker's replicas are the GPUs
    asked for it, else its ``runtime.cpu_devices`` (a job given no GPU sees none)."""
    per_worker = gpus_per_worker or config.runtime.cpu_devices
    return config_split(config, workers * per_worker, workers)


def split_text(batch: int, replicas: int) -> str:
    """``33 and 32 examples``, ``22, 21 and 21 examples``; past four replicas ``3 replicas get 9
    examples, 5 get 8``."""
    per_replica, remainder = divmod(batch, replicas)
    if replicas <= 4:
        sizes = [str(per_replica + 1)] * remainder + [str(per_replica)] * (replicas - remainder)
        return f"{', '.join(sizes[:-1])} and {sizes[-1]} examples"
    return (f"{count(remainder, 'replica')} {'gets' if remainder == 1 else 'get'} {per_replica + 1} examples, "
            f"{replicas - remainder} get {per_replica}")


def cluster_workers(strategy: str, cluster: object, workers: int) -> int | None:
    """The worker processes a config names: its host list, else ``strategy.workers``; None when
    a scheduler or TF_CONFIG decides (``workers`` 0, no host list). One for single-process strategies."""
    if strategy not in ("multi_worker_mirrored", "parameter_server"):
        return 1
    if isinstance(cluster, tuple) and cluster:
        return len(cluster)
    return workers or None
