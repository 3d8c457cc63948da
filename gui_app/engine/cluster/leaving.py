"""How a worker of a MultiWorkerMirrored cluster leaves it once the run has ended.

Measured before this (two local workers, digits, 10 epochs, ``train --detach``): ``run_finished``
came 1.4-11 s after the last ``eval`` with one CPU replica a worker and 61-123 s with two (a Slurm
job of two nodes: 122 s; worker 1 over ssh: 8.5 s), and the log held TensorFlow's coordination
errors ("The tasks have crashed. Check the task logs for an earlier error", heartbeats refused).
Every worker had its part written within a second of the eval; what followed was each process's
exit, on its own:

- The interpreter's teardown waited for tf.data to delete the distributed iterators the loop had
  retired (engine/training/retire.py drains them at exit, up to 120 s): deleting a multi-device
  iterator of a cluster worker waited there for TensorFlow's own input threads, 40 s and more,
  on the chief and the other workers alike. A worker that has written everything has nothing to
  release that the end of the process does not release.
- The workers did not end together. TensorFlow's coordination service lives in the chief, and
  each worker's agent sends it heartbeats: a worker still there when the chief had gone logged
  its refused heartbeats; a chief still there when a worker had stopped sending them reported
  that task as crashed, an error the collective runtime then raised in every peer.

So each worker that ended its run normally (completed, or stopped by an agreed stop) waits at one
barrier of the coordination service, where the cluster agrees that every worker is done; then the
workers other than the chief end at once, without the teardown (engine/run/exits.exit_now); the chief,
which hosts the service, waits until their servers are gone (a few milliseconds; at most
:data:`PEERS_GONE_S`) and ends last. A failure is not this path: it ends as before, so the launcher
and the logs still name the worker and the error.
"""
from __future__ import annotations

import sys
import time

from gui_app.engine.cluster.topology import Task, reachable
from gui_app.engine.run.exits import exit_now
from gui_app.engine.run.failures import one_line

BARRIER = "replica-studio:run-ended"
# How long a worker waits for the others at the end. The chief reaches it last, after the final
# evaluation, the saved model and the gallery; the others wait for that.
END_BARRIER_S = 600.0
PEERS_GONE_S = 5.0  # how long the chief waits for the other workers' servers to close
_POLL_S = 0.02


def leave(task: Task, code: int, barrier_s: float = END_BARRIER_S) -> None:
    """Meet the other workers at the end, then end this process with ``code`` (never returns)."""
    if not task.peers():  # a cluster of one: nobody to wait for
        exit_now(code)
    try:
        wait_at_barrier(BARRIER, barrier_s)
    except Exception as exc:  # noqa: BLE001 - a peer failed or never came: its own end tells why
        print(f"[replica-studio] {task.name}: the other workers did not all reach the end of the run within "
              f"{barrier_s:g} s ({one_line(exc)}); leaving without them", file=sys.stderr, flush=True)
    else:
        if task.is_chief:
            peers_gone([address for _, address in task.peers()], PEERS_GONE_S)
    exit_now(code)


def wait_at_barrier(barrier_id: str, timeout_s: float) -> None:
    """Block until every task of the cluster called this with the same id (TensorFlow's
    coordination service); raises TensorFlow's error when one failed or ``timeout_s`` passed."""
    from tensorflow.python.eager import context

    context.context().wait_at_barrier(barrier_id, int(timeout_s * 1000))


def peers_gone(addresses: list[str], timeout_s: float) -> bool:
    """Wait until no address accepts connections any more (their processes ended); False if some
    still did after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    left = list(addresses)
    while left:
        left = [a for a in left if reachable(a)]
        if not left:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL_S)
    return True
