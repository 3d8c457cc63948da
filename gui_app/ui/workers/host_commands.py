"""Commands that reach a run where it lives: built off the GUI thread when building them waits.

The window reaches an SSH host with engine commands only, each run through the one process runner
(gui_app/ui/workers/process.py): short ones as an EngineJob with ``--host`` (the engine there does
the ssh), followers (``attach``, ``log --follow``, Open's replay) as a RunJob or an EngineProcess
running the system ``ssh`` itself, whose exit 255 says the connection failed. Building such an
ssh command line asks ``ssh -G`` for the shared connection's name first: a process the GUI thread
must not wait for. :func:`when_prepared` asks it on a Background thread
(:meth:`gui_app.core.backends.base.RunBackend.prepare`) and then calls back on the GUI thread,
where the command line is built from the answer and started. A run here needs no preparing: the
callback comes at once, as before.
"""
from __future__ import annotations

from typing import Callable

from gui_app.core.backends import RunBackend
from gui_app.ui.workers.background import Background, Send


def when_prepared(background: Background, backend: RunBackend, then: Callable[[], object]) -> None:
    """Call ``then()`` on the GUI thread once ``backend``'s command lines can be built without a
    wait (at once for a run here; after ``backend.prepare()`` on ``background``'s thread otherwise)."""
    if not backend.remote:
        then()
        return
    background.run(_prepare, backend, deliver=lambda _done: then(), name="prepare-ssh")


def _prepare(send: Send, backend: RunBackend) -> None:
    backend.prepare()  # ssh -G: a process, waited for here
    send(None)
