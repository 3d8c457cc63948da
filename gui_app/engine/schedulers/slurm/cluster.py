"""The cluster of a Slurm job step, from Slurm's own variables (TensorFlow-free).

TensorFlow's ``SlurmClusterResolver`` (TF 2.21) sorts the host names as text
(``sorted(self._task_configuration.items())``) while the task index is ``SLURM_PROCID``, given
in Slurm's node order: with nodes ``node9`` and ``node10`` rank 0 got node10's address and the
cluster never formed. So the worker list is built here in Slurm's order: the step's node list
expanded as ``scontrol show hostnames`` does, tasks placed on nodes in blocks
(``SLURM_STEP_TASKS_PER_NODE``), rank r is the r-th task. Every worker checks that the others
built the same list (engine/cluster/run_identity.py).

Ports are per job: two jobs sharing nodes on one fixed port collided (both failed to start their
gRPC servers, or one job's chief trained with the other job's worker). ``SLURM_JOB_ID`` picks a
block of ``PORTS_PER_JOB`` ports in ``[PORT_LOW, PORT_LOW + PORT_SPAN)``; jobs whose ids differ by
a multiple of the span could still meet, and the run identity check refuses such a worker.
``REPLICA_STUDIO_SLURM_PORT_BASE`` sets the first port explicitly.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping

PORT_ENV = "REPLICA_STUDIO_SLURM_PORT_BASE"
PORT_LOW, PORT_SPAN, PORTS_PER_JOB = 20000, 40000, 8  # ports 20000-59999: above the usual services


def expand_hostlist(text: str) -> list[str]:
    """``node[9-10],gpu[01-02,7]`` -> ``[node9, node10, gpu01, gpu02, gpu07]`` in the written order
    (what ``scontrol show hostnames`` prints); ranges keep the width of their first number."""
    hosts: list[str] = []
    for item in _split_top(text):
        names = [""]
        for literal, ranges in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", item):
            names = [n + literal for n in names]
            if ranges:
                names = [n + s for n in names for s in _expand_ranges(ranges)]
        hosts += [n for n in names if n]
    return hosts


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets."""
    items, depth, current = [], 0, ""
    for ch in text.strip():
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    return [i for i in items + [current] if i]


def _expand_ranges(ranges: str) -> list[str]:
    out = []
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        if not last:
            out.append(first)
            continue
        width = len(first)
        out += [str(i).zfill(width) for i in range(int(first), int(last) + 1)]
    return out


def tasks_per_node(text: str) -> list[int]:
    """``2(x3),1`` -> ``[2, 2, 2, 1]``."""
    counts: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            raise ValueError(f"SLURM_STEP_TASKS_PER_NODE: cannot read {text!r}")
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


def first_port(env: Mapping[str, str]) -> int:
    if env.get(PORT_ENV):
        return int(env[PORT_ENV])
    return PORT_LOW + (int(env.get("SLURM_JOB_ID", "0")) * PORTS_PER_JOB) % PORT_SPAN


def workers(env: Mapping[str, str] = os.environ) -> list[str]:
    """``host:port`` of every task of this job step, rank order."""
    nodes = expand_hostlist(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "")
    if not nodes:
        raise ValueError("SLURM_STEP_NODELIST is not set")
    per_node = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or "1"
    counts = tasks_per_node(per_node)
    if len(counts) != len(nodes):
        raise ValueError(f"{len(nodes)} nodes in the step's node list but tasks per node {per_node!r}")
    port = first_port(env)
    return [f"{node}:{port + local}" for node, count in zip(nodes, counts) for local in range(count)]
