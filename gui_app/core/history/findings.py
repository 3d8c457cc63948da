"""RunFindings: what ``replica-studio diagnose`` would say of the run on screen, folded from its
events as they arrive (the window's banner over the charts shows it).

The findings and their sentences are ``diagnose``'s own (gui_app/core/finding_rules.py, which
gui_app/core/diagnosis.py applies to a run's folder), computed from the same
events it reads (the last process's, the last :data:`~gui_app.core.finding_rules.STEP_WINDOW` steps
and the step before each ``epoch_end``), so the window and ``diagnose`` never word a finding
twice:

- ``non_finite``: found when the run's ``non_finite`` event comes (before its ``error``), with
  the run's folder to name the checkpoint that is really kept;
- ``stall``: a cluster's ``stall`` event (its launcher watched the workers), until its
  ``stall_cleared`` or the next step; else, only while the run is live and only the window knows
  the clock then: :meth:`RunFindings.check_stall` applies the rule to now and the run's process,
  and the next step clears it.
- ``straggler``: looked for again every :data:`STRAGGLER_EVERY` steps.

The run's ``error`` is kept beside them (``error``): the Details view shows it under the findings.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from gui_app.core import finding_rules
from gui_app.core.answers import Finding
from gui_app.core.events import EpochEnd, Error, Event, NonFinite, Paused, RunStarted, Stall, StallCleared, Step
from gui_app.core.finding_rules import STEP_WINDOW

STRAGGLER_EVERY = 10  # steps between two looks for a straggler (a look reads the last 40 steps)


class RunFindings:
    stall_floor: float | None = None  # None: diagnosis.STALL_FLOOR_SECONDS; tests lower it

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.run_dir: str | None = None
        self.started: RunStarted | None = None
        self.non_finite: Finding | None = None
        self.stall: Finding | None = None
        self.told_stall = False  # the stall is a cluster's stall event (the clock rule leaves it be)
        self.straggler: Finding | None = None
        self.error: str | None = None  # the run's error message, once it failed
        self.last_time = 0.0  # the latest event's time (the engine's clock)
        self._events: list[Event] = []
        self._steps = 0  # the steps among _events

    @property
    def findings(self) -> list[Finding]:
        """The findings now, the non-finite one first."""
        return [f for f in (self.non_finite, self.stall, self.straggler) if f is not None]

    def add(self, event: Event) -> bool:
        """Fold one event; True when the findings (or the error) changed."""
        self.last_time = max(self.last_time, event.time or 0.0)
        if isinstance(event, RunStarted):  # only the last process counts (a resumed run starts anew)
            self._reset()
            self.started, self.run_dir, self.last_time = event, event.run_dir, event.time or 0.0
            self._events.append(event)
            return True
        self._events.append(event)
        changed = False
        if isinstance(event, Step):
            self._steps += 1
            if self._steps > 2 * STEP_WINDOW:
                self._prune()
            if self.stall is not None:  # steps flow again
                self.stall, self.told_stall, changed = None, False, True
            if self._steps % STRAGGLER_EVERY == 0:
                found = finding_rules.straggler(self._events)
                straggler = found[0] if found else None
                changed = changed or (straggler is None) != (self.straggler is None) or (
                    straggler is not None and self.straggler is not None and straggler.worker != self.straggler.worker)
                self.straggler = straggler
        elif isinstance(event, Stall):
            found = finding_rules.cluster_stall(self._events)
            self.stall, self.told_stall, changed = (found[0] if found else None), bool(found), True
        elif isinstance(event, StallCleared) and self.stall is not None:
            self.stall, self.told_stall, changed = None, False, True
        elif isinstance(event, NonFinite):
            found = finding_rules.non_finite(self._events, self.started, self._kept)
            self.non_finite, changed = (found[0] if found else None), True
        elif isinstance(event, Error):
            self.error, changed = event.message, True
        elif isinstance(event, Paused) and self.stall is not None:  # a paused run is never stalled
            self.stall, changed = None, True
        return changed

    def floor(self) -> float:
        """The shortest silence that is a stall."""
        return finding_rules.STALL_FLOOR_SECONDS if self.stall_floor is None else self.stall_floor

    def check_stall(self, now: float, pid: int | None, state_of: Callable[[], str | None]) -> bool:
        """Apply ``diagnose``'s stall rule at ``now`` (Unix time) to the live run held by process
        ``pid`` (None: no process holds the run, so nothing is stalled; ``state_of()``: its OS
        state); True when the stall finding appeared, changed its figures or went."""
        if self.told_stall:  # the cluster's launcher said it, with every worker: its event stands
            return False
        found = [] if pid is None else finding_rules.stall(self._events, now, self.started, pid, state_of, self.floor())
        stall = found[0] if found else None
        changed = (stall is None) != (self.stall is None) or (
            stall is not None and self.stall is not None and stall.message != self.stall.message)
        self.stall = stall
        return changed

    def silent_for(self, now: float) -> float:
        """Seconds since the latest event (0 before any): the cheap test before :meth:`check_stall`."""
        return now - self.last_time if self.last_time else 0.0

    def _kept(self, recorded: str | None) -> str | None:
        """The checkpoint ``recorded`` as it is in the run's folder now: the engine writes its
        path in the run's checkpoints folder, whose name is taken from it (the run folder's
        layout is rundir's, which this package cannot import: rundir imports it)."""
        if not recorded or not self.run_dir:
            return None
        here = Path(self.run_dir) / Path(recorded).parent.name / Path(recorded).name
        return str(here) if here.with_name(here.name + ".index").is_file() else None

    def _prune(self) -> None:
        """Keep the last :data:`STEP_WINDOW` steps, the step before each ``epoch_end`` (the stall
        rule's allowance between epochs reads it) and every other event, in order."""
        events, kept, steps = self._events, [], 0
        for i in range(len(events) - 1, -1, -1):
            event = events[i]
            if isinstance(event, Step):
                after = events[i + 1] if i + 1 < len(events) else None
                if steps >= STEP_WINDOW and not isinstance(after, EpochEnd):
                    continue
                steps += 1
            kept.append(event)
        kept.reverse()
        self._events, self._steps = kept, steps
