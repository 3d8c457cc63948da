"""Which run a worker belongs to, checked by every worker as soon as the cluster has formed.

Two Slurm jobs on the same nodes once shared a port, and one job's chief trained with the other
job's worker: its run directory said completed while Slurm said FAILED. So each worker hashes
what makes its run -- the worker list it built (under Slurm from the job's node list, in Slurm's
order), the run configuration, and Slurm's job and step id or the uid of the Kubernetes Job (a
pod left from an older Job of the same name is of another run) -- and the workers all-gather
their hashes once, before the first step. A worker whose hash differs is of another run (or
built another worker list): every worker refuses, names it and ends without training.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping

import numpy as np

from gui_app.engine.run.failures import ClusterFailed
from gui_app.engine.schedulers.kubernetes.cluster import JOB_UID_ENV

_PARTS, _BITS = 3, 20  # 60 bits of the hash as three float32 values (exact up to 2**24)


def run_identity(cluster: dict[str, list[str]], config_json: str, env: Mapping[str, str] = os.environ) -> str:
    """The hash every worker of one run computes alike."""
    parts = [json.dumps(cluster, sort_keys=True), config_json,
             env.get("SLURM_JOB_ID", ""), env.get("SLURM_STEP_ID", ""), env.get(JOB_UID_ENV, "")]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def check_same_run(strategy, identity: str, replica_workers: list[int]) -> None:
    """All-gather every replica's identity; ClusterFailed naming the workers that differ from this one."""
    import tensorflow as tf

    value = int(identity[:_PARTS * _BITS // 4], 16)
    mine = np.array([(value >> (_BITS * i)) & ((1 << _BITS) - 1) for i in range(_PARTS)], np.float32)

    @tf.function
    def gather(x):
        per_replica = strategy.run(lambda: tf.expand_dims(x, 0))
        return strategy.gather(per_replica, axis=0)

    rows = gather(tf.constant(mine)).numpy()
    others = sorted({replica_workers[i] if i < len(replica_workers) else i
                     for i, row in enumerate(rows) if not np.array_equal(row, mine)})
    if others:
        raise ClusterFailed(f"worker(s) {', '.join(map(str, others))} of this cluster belong to another run (a "
                            "different job, configuration or worker list); refusing to train with them", 0)
