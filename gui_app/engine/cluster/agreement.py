"""Stop, pause and checkpoint, agreed by every worker of a MultiWorkerMirrored cluster.

The workers run the same collectives in the same order; if one stopped (or checkpointed)
a step group before the others, they would wait for it in an all-reduce until the timeout.
So the commands a worker received (the chief gets the window's through the launcher, any
worker may get SIGTERM) are summed over all replicas once per step group, and every worker
acts on the sum. While paused the workers agree again every half second, far below any
collective timeout, and continue together.

It is the run's :class:`~gui_app.engine.run.control.RunControl`, which the run controller polls
(``paused`` first in each step group, then ``stop_requested``, ``take_checkpoint_request``);
the agreement runs when ``paused`` is read, which every worker does at the same point.
"""
from __future__ import annotations

import time

import numpy as np

from gui_app.engine.run.control import Control


class ClusterControl:
    def __init__(self, local: Control, strategy):
        import tensorflow as tf

        self.local, self.strategy = local, strategy
        self._stop = self._pause = self._checkpoint = False

        @tf.function
        def agree(flags):
            per_replica = strategy.run(tf.identity, args=(flags,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        self._agree = agree

    def _sync(self) -> None:
        import tensorflow as tf

        ask_checkpoint = self.local.take_checkpoint_request()
        flags = np.array([self.local.stop_requested, self.local.paused, ask_checkpoint], np.float32)
        total = self._agree(tf.constant(flags)).numpy()
        self._stop = self._stop or bool(total[0] > 0)
        self._pause = bool(total[1] > 0) and not self._stop
        self._checkpoint = self._checkpoint or bool(total[2] > 0)

    # ---- what the loop asks -----------------------------------------------------------
    @property
    def paused(self) -> bool:
        self._sync()
        return self._pause

    @property
    def stop_requested(self) -> bool:
        return self._stop

    @property
    def stop_reason(self) -> str | None:
        """Why the cluster stopped, when not asked by a ``stop`` line: this worker's signal, or a peer's."""
        if self.local.stop_requested:
            return self.local.stop_reason
        return "stopped by another worker (a signal or its window)"

    def wait_while_paused(self, timeout: float | None = None) -> bool:
        time.sleep(0.5 if timeout is None else min(timeout, 0.5))
        self._sync()
        return not self._pause

    def take_checkpoint_request(self) -> bool:
        asked, self._checkpoint = self._checkpoint, False
        return asked

    def command(self, word: str) -> None:
        self.local.command(word)
