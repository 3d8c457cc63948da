"""RunActions: the Run side of the main window -- train, resume, pause and continue -- and what a
run's start and end show.

The contract: it starts and steers runs through the RunSupervisor and follows them. The live run
goes on screen (ShownRun) and its batches are folded there; when it ends, the status line and the
progress line say how, a completed run's evaluation comes on show and a failure opens a dialog
(window-modal, not blocking). It works on the window's state, the supervisor, the forms (the
configuration to train; device detection and the dataset inspection, put off while a run starts)
and the run on screen; ``note(str)`` carries a line for the Log tab.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from gui_app.core.config import RunConfig
from gui_app.core.events import Error, Event, RunStarted, Step
from gui_app.core.history import RunHistory
from gui_app.core.rundir import events_bytes, read_history
from gui_app.core.ssh_hosts import Host, HostsFileError, find_host, split_run_key
from gui_app.core.wording import for_people
from gui_app.ui.config.config_panel import ConfigPanel
from gui_app.ui.dialogs.resume import ResumeDialog
from gui_app.ui.window.file_actions import READ_HERE_BYTES
from gui_app.ui.window.run_progress import describe_end
from gui_app.ui.window.shown_run import ShownRun
from gui_app.ui.window.window_state import EVALUATION, PAUSED, STATE_TEXT, TRAINING, WindowState
from gui_app.ui.workers.background import Background, Send
from gui_app.ui.workers.supervisor import RunSupervisor


class RunActions(QObject):
    note = Signal(str)

    def __init__(self, window: QWidget, state: WindowState, *, supervisor: RunSupervisor, forms: ConfigPanel,
                 shown: ShownRun) -> None:
        super().__init__(window)
        self._window, self._state, self._supervisor, self._forms, self._shown = window, state, supervisor, forms, shown
        self.failure_box: QMessageBox | None = None
        self.resume_dialog: ResumeDialog | None = None
        self.closing = False  # the run is being stopped so that the window can close
        # Background work put off until the run's first step (see _defer_background_work).
        self._deferred_detection = self._deferred_inspection = False
        self._reading = Background(self)  # a big run's history, read before it is resumed
        supervisor.events.connect(self._on_events)
        supervisor.run_started.connect(self._on_run_started)
        supervisor.notice.connect(self._on_notice)
        state.run_ended.connect(self._on_run_ended)

    # ---- starting and steering -------------------------------------------------------------------
    def train(self) -> None:
        """Train what is on the forms: a field still being typed into is checked first (Ctrl+R
        right after typing a value), and nothing starts unless the forms are valid and their
        dataset and model check passed (the action is disabled otherwise)."""
        self._forms.flush()
        config = self._forms.checked_config()
        if config is not None and self._state.is_idle():
            self._start_training(config)

    def _start_training(self, config: RunConfig) -> None:
        self._shown.clear()
        host = self._state.run_on  # Run on: this computer or an SSH host
        self.note.emit(f"Training {config.dataset.name} with {config.model.name} ({config.strategy.name})"
                       + (f" on {host.name}" if host is not None else ""))
        self._defer_background_work()
        self._supervisor.start_train(config, self._state.runs_dir, host=host)
        self._state.set_tab(TRAINING)

    def train_at_launch(self) -> None:
        """``--train``: start the run now, without waiting for the dataset and model check (the
        run checks the same, and says so if it fails); device detection (not started yet) and
        the inspection (asked for when the forms were filled) follow its first step."""
        config = self._forms.config()
        if config is not None and self._state.is_idle():
            self._deferred_detection = True
            self._start_training(config)

    def resume_run(self, run_dir: str, overrides: Sequence[str] | None = None) -> None:
        """Resume a run from its checkpoint; a failed one first asks what to change (ResumeDialog),
        since resuming it unchanged would fail the same way."""
        if not self._state.is_idle() or self._reading.busy():  # (reading a run to resume it)
            return
        listed = next((r for r in self._state.selection if r.path == str(run_dir)), None)
        info = listed.info if listed is not None else None
        if overrides is None and info is not None and info.status == "failed":
            self.resume_dialog = ResumeDialog(info, self._window)
            self.resume_dialog.accepted.connect(lambda: self.resume_run(run_dir, self.resume_dialog.overrides()))
            self.resume_dialog.open()
            return
        if listed is not None and listed.bundle:  # its copy is the window's: a new run folder is made for it
            self._resume_bundle(listed.bundle, overrides or ())
            return
        host_name, there = split_run_key(str(run_dir))
        try:
            host = None if host_name is None else find_host(host_name)
        except HostsFileError as exc:
            self._state.set_status(f"Cannot resume {run_dir}: {exc}")
            return
        # The history first: the resumed engine appends to the same events.jsonl, and the
        # charts drop any steps after the checkpoint when its run_started arrives. A host's
        # run brings its history with it (followed from its first event). A big run's is read
        # on a thread, as Open reads it (a run of GBs without its pyramid takes seconds).
        if host is not None:
            self._shown.clear()
        elif events_bytes(run_dir) > READ_HERE_BYTES:
            self._state.set_status(f"Reading {Path(run_dir).name}…")
            self._reading.run(_read_history, str(run_dir), deliver=lambda read: self._resume_read(read, overrides),
                              failed=lambda exc: self._state.set_status(f"Cannot resume {run_dir}: {exc}"),
                              name="resume-read")
            return
        else:
            self._shown.show_history(run_dir)
        self._resume(there, host, overrides)

    def _resume_read(self, read: tuple[str, RunHistory], overrides: Sequence[str] | None) -> None:
        run_dir, history = read
        if self._state.is_idle():  # (nothing started while it was read)
            self._shown.show_history(run_dir, history)
            self._resume(run_dir, None, overrides)

    def _resume(self, run_dir: str, host: Host | None, overrides: Sequence[str] | None) -> None:
        self.note.emit(f"Resuming {Path(run_dir).name}" + (f" on {host.name}" if host is not None else ""))
        self._defer_background_work()
        self._supervisor.start_resume(run_dir, overrides or (), host=host)
        self._state.set_tab(TRAINING)

    def _resume_bundle(self, bundle: str, overrides: Sequence[str]) -> None:
        """Resume a bundle's run in a new run folder of the runs folder (the engine extracts it
        there, checked whole: ``resume BUNDLE --runs-dir``); its history comes with its events."""
        self._shown.clear()
        self.note.emit(f"Resuming the bundle {Path(bundle).name} in a new run folder of {self._state.runs_dir}")
        self._defer_background_work()
        self._supervisor.start_resume_bundle(bundle, self._state.runs_dir, overrides)
        self._state.set_tab(TRAINING)

    def resume_selected(self) -> None:
        selected = self._state.resumable_selection()
        if selected is not None:
            self.resume_run(selected.path)

    def pause_or_continue(self) -> None:
        if self._state.run_state == PAUSED:
            self._supervisor.continue_run()
        else:
            self._supervisor.pause()

    def stop_to_close(self) -> None:
        """Stop the run cooperatively and close the window once it has ended (the supervisor
        kills the engine after its grace period)."""
        self.closing = True
        self._supervisor.stop()
        self._state.set_status("Stopping the run before closing…")

    # ---- background work put off while a run starts ---------------------------------------------
    def _defer_background_work(self) -> None:
        """A run starting while device detection or the dataset inspection still runs: stop them
        and run them again once its first step has arrived. Started together, three TensorFlow
        processes share the cores, and the first step came 3x later (docs/benchmarks.md, Start-up)."""
        forms = self._forms
        if forms.devices.is_detecting():
            forms.devices.cancel_detection()
            self._deferred_detection = True
        if forms.inspector.is_busy():
            forms.inspector.cancel()
            self._deferred_inspection = True

    def _start_deferred(self) -> None:
        if self._deferred_detection:
            self._deferred_detection = False
            self._forms.start_detection()
        if self._deferred_inspection:
            self._deferred_inspection = False
            self._forms.inspector.retry()

    # ---- following the run -------------------------------------------------------------------------
    def _on_events(self, events: list[Event]) -> None:
        self._shown.add_events(events)
        if (self._deferred_detection or self._deferred_inspection) and any(isinstance(e, Step) for e in events):
            self._start_deferred()
        for event in events:
            if isinstance(event, Error):
                self.note.emit(f"Engine error: {event.message}")

    def _on_notice(self, text: str) -> None:
        """The attachment to the run dropped and is made again ("" once it is)."""
        self._state.set_status(text or STATE_TEXT[self._state.run_state])
        if text:
            self.note.emit(text)

    def _on_run_started(self, event: RunStarted) -> None:
        self._shown.set_path(event.run_dir or self._shown.path)

    def _on_run_ended(self, status: str, run_dir: str, message: str) -> None:
        self._start_deferred()  # a run that ended before its first step
        message = for_people(message)  # the form's words, not the config keys the engine names
        if status == "completed":
            text = "Run completed" + (f": {message}" if message else "")
        else:  # at which step: "Run failed at step 12 of 200: <why>"
            told = describe_end(status, message, self._shown.history)
            text = f"Run {told[0].lower()}{told[1:]}"
        self._state.set_run_status(text)  # the run's own line: it goes when another run is opened
        self._shown.show_end(status, message)
        self.note.emit(text)
        if run_dir and status == "completed" and self._shown.has_evaluation():  # drawn when its event came
            self._state.set_tab(EVALUATION)
        if self.closing:
            QTimer.singleShot(0, self._window.close)
        elif status in ("failed", "interrupted"):
            self.failure_box = QMessageBox(QMessageBox.Icon.Warning, f"Run {status}", message or f"The run {status}.",
                                           QMessageBox.StandardButton.Ok, self._window)
            self.failure_box.open()  # window-modal but not blocking: the event loop keeps going


def _read_history(send: Send, run_dir: str) -> None:
    """On a Background thread: the run's history, for :meth:`RunActions._resume_read`."""
    send((run_dir, read_history(run_dir)))
