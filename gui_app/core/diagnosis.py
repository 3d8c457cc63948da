"""What is wrong with a run, or was wrong with it at its end: ``replica-studio diagnose``'s
findings (docs/diagnose.md), read from the run's folder alone.

- ``non_finite``: the ``non_finite`` event the NaN guard (or the checkpoints' weight check)
  wrote before the run failed: the step, the replica and worker, whether the local loss or the
  local gradients went first, the gradient-norm history that led there, the checkpoint that
  is really kept (its file checked here), and what the engine's replay of the last steps found
  (the first layer non-finite, the examples whose loss alone is).
- ``stall``: a cluster's ``stall`` event not followed by a step (its launcher watches the
  workers' reports: who holds the others up, every worker's phase and stack); else a run whose
  process holds its lock (gui_app/core/live_runs.py) but has written nothing for much longer than
  the recent time between two step groups.
- ``straggler``: a cluster's worker that arrives at the all-reduce last, by a large share of the
  step, over most of the recent steps (each replica's ``ready_time``).
- ``input_bound``: the replicas waited a large share of their recent steps for the batch.

Only the events of the run's last process count (a run that diverged and was resumed with a
lower rate is not diverged any more).

Qt-free and TensorFlow-free: it reads JSON lines, and ``/proc`` for the state of a process here.
The rules themselves, which need only the events, are gui_app/core/finding_rules.py's (the
window's run history applies them too).
"""
from __future__ import annotations

import socket
import time
from pathlib import Path

from gui_app.core import finding_rules, rundir
from gui_app.core.answers import Diagnosis, Finding
from gui_app.core.events import EpochEnd, Event, RunStarted, Step, decode_line
from gui_app.core.finding_rules import (  # the rules, here with the run's folder and process
    CLIMB,
    HISTORY_STEPS,
    STALL_FACTOR,
    STALL_FLOOR_SECONDS,
    STEP_WINDOW,
    cluster_stall,
    input_bound,
    straggler,
)
from gui_app.core.live_runs import RunProcess, live_process, local_state_code

__all__ = ["CLIMB", "HISTORY_STEPS", "STALL_FACTOR", "STALL_FLOOR_SECONDS", "STEP_WINDOW", "NotARun", "diagnose",
           "cluster_stall", "input_bound", "non_finite", "process_state", "recent_events", "sentences", "stall",
           "straggler"]
_STEP_PREFIX = b'{"type":"step",'
_PROC_STATES = {"R": "running", "S": "sleeping", "D": "waiting for the disk", "T": "stopped", "t": "stopped",
                "Z": "a zombie", "I": "idle"}


class NotARun(ValueError):
    """The folder is not a run directory, or its events cannot be read: bad input."""


def diagnose(run_dir: str | Path, now: float | None = None) -> Diagnosis:
    """The run's status and findings; :class:`NotARun` for a folder that is not a run."""
    run_dir = Path(run_dir)
    if not rundir.is_run_dir(run_dir):
        raise NotARun(f"{run_dir} is not a run directory (no {rundir.CONFIG_FILE})")
    try:
        events = recent_events(run_dir)
    except OSError as exc:
        raise NotARun(f"{run_dir}: cannot read its events: {exc.strerror or exc}") from None
    process = live_process(run_dir)
    status = "running" if process is not None else rundir.read_run(run_dir).status
    started = next((e for e in events if isinstance(e, RunStarted)), None)
    findings = [*non_finite(run_dir, events, started)]
    told = cluster_stall(events)  # the cluster's launcher saw it, with every worker's figures
    if told:
        findings += told
    elif process is not None:
        findings += stall(events, process, time.time() if now is None else now, started)
    findings += straggler(events)
    findings += input_bound(events, started)
    return Diagnosis(str(run_dir), status, findings)


def recent_events(run_dir: Path) -> list[Event]:
    """The events of the run's last process (from its last ``run_started`` on), in order, the
    steps among them only the last :data:`STEP_WINDOW` and the one before each ``epoch_end``
    (what the findings read). Read from the end: the steps before are not decoded (a 50,000-step
    run's 46 MB took 2.7 s to decode whole here)."""
    try:
        with (run_dir / rundir.EVENTS_FILE).open("rb") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:  # a run that has not started yet
        return []
    out: list[Event] = []
    steps, after_epoch = 0, False
    for line in reversed(lines):
        is_step = line.startswith(_STEP_PREFIX)  # the engine's compact JSON; any other line is decoded
        if is_step and steps >= STEP_WINDOW and not after_epoch:
            continue
        event = decode_line(line, parts=not is_step or steps < STEP_WINDOW)
        if event is None:
            continue
        out.append(event)
        steps += isinstance(event, Step)
        after_epoch = isinstance(event, EpochEnd)
        if isinstance(event, RunStarted):
            break
    return out[::-1]


def non_finite(run_dir: Path, events: list[Event], started: RunStarted | None) -> list[Finding]:
    """The ``non_finite`` finding (finding_rules.non_finite), its checkpoint looked for in ``run_dir``."""
    return finding_rules.non_finite(events, started, lambda recorded: _kept(run_dir, recorded))


def _kept(run_dir: Path, recorded: str | None) -> str | None:
    """The last good checkpoint as it is in the run's folder now (it may have moved since),
    None when none was written or its files are gone."""
    if not recorded:
        return None
    here = run_dir / rundir.CHECKPOINT_DIR / Path(recorded).name
    return str(here) if here.with_name(here.name + ".index").is_file() else None


# ---- stall --------------------------------------------------------------------------------------
def stall(events: list[Event], process: RunProcess, now: float, started: RunStarted | None = None,
          floor: float = STALL_FLOOR_SECONDS) -> list[Finding]:
    """The ``stall`` finding of a live run held by ``process`` (finding_rules.stall), its state from ``/proc``."""
    return finding_rules.stall(events, now, started, process.pid, lambda: process_state(process), floor)


def process_state(process: RunProcess) -> str | None:
    """The OS state of the run's process from ``/proc`` when it runs on this machine, else None."""
    if process.host != socket.gethostname():
        return None
    code = local_state_code(process.pid)
    return None if code is None else _PROC_STATES.get(code, code)


def sentences(diagnosis: Diagnosis) -> str:
    """``diagnose``'s text: one sentence per finding, or that there is none."""
    if not diagnosis.findings:
        return f"{diagnosis.run}: {diagnosis.status}; nothing wrong found."
    return "\n".join([f"{diagnosis.run}: {diagnosis.status}", *(f"- {f.message}" for f in diagnosis.findings)])
