"""The sweep view: a window of its own that follows one sweep folder (docs/sweeps.md, "In the window").

It follows ``sweep status SWEEP_DIR --json --every 2`` (an engine process: Optuna never loads in
the window), a status line every 2 s while the sweep's process or a trial runs, one for a sweep
that has ended (a process per status would import Optuna and SQLAlchemy each time: 1 s of CPU a
poll on the 2-core test machine, against 0.02 s a line); the trials' validation curves are read
from their run directories off the GUI thread (:class:`~gui_app.ui.sweep.curves.CurveReader`).
Its buttons act on the trials: Open trial (the selected one), Compare trials (the window's run
comparison), Train the best config (the forms get the best trial's configuration; the user
presses Train), Export the best model; and on the sweep: Stop (``sweep stop``) and Resume
(``sweep resume --detach``). When a sweep the view saw running ends, ``ended`` says how
(``completed``, ``stopped`` or ``failed``) for the desktop notification.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, cast

from PySide6.QtCore import QItemSelectionModel, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gui_app.core.answers import SweepStatus, SweepTrial, decode
from gui_app.core.config import RunConfig
from gui_app.core.config_json import ConfigError
from gui_app.core.ssh_hosts import run_key
from gui_app.core.sweep_config import SWEEP_FILE, SWEEP_LOG, SweepConfig
from gui_app.core.wording import label
from gui_app.ui.colors import ERROR_STYLE
from gui_app.ui.labels import ElidedLabel
from gui_app.ui.screen_fit import ScreenFit
from gui_app.ui.sweep.charts import SweepCharts
from gui_app.ui.sweep.curves import CurveReader
from gui_app.ui.sweep.figures import DONE, METRICS, finite, outcome
from gui_app.ui.workers.detached_start import DetachedStart
from gui_app.ui.workers.engine_job import EXIT_OK, ServingJob

POLL_S = 2
RETRY_MS = 5000  # after a status that failed (a sweep folder on a slow disk)


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def value_text(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class StatusFeed(ServingJob):
    """``sweep status --json --every S``: each line a result as it comes; it ends by itself once
    nothing of the sweep runs, which is no failure."""

    keeps_stdin = False

    def _report_end(self, code: int, crashed: bool, line: str) -> None:
        if code != EXIT_OK or crashed:
            super()._report_end(code, crashed, line)


class SweepView(QWidget):
    open_run = Signal(str)
    compare_runs = Signal(list)  # the trials' run directories
    train_config = Signal(object)  # a RunConfig: the best trial's
    export_run = Signal(str)
    ended = Signal(str, str, str)  # how (completed, stopped, failed), the sweep folder, its line
    log_line = Signal(str)

    def __init__(self, sweep_dir: str, engine_command: Callable[..., list[str]], parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.sweep_dir = str(sweep_dir)
        self._engine_command = engine_command
        self.setWindowTitle(f"Sweep — {Path(sweep_dir).name}")
        self.sweep = SweepConfig.load(Path(sweep_dir) / SWEEP_FILE)  # ConfigError: not a sweep folder
        self.status: SweepStatus | None = None
        self._seen_running = False  # the sweep's process ran at some poll: its end is news
        self._job: StatusFeed | None = None
        self._action: DetachedStart | None = None  # stop or resume under way

        self.header = ElidedLabel("Reading the sweep…")
        self.message = QLabel(wordWrap=True, textFormat=Qt.TextFormat.PlainText)
        self.table = QTableWidget(0, 0)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.table.doubleClicked.connect(lambda _index: self.open_selected())
        self.charts = SweepCharts()
        self.open_button = QPushButton("Open trial")
        self.compare_button = QPushButton("Compare trials…")
        self.train_button = QPushButton("Train the best config")
        self.export_button = QPushButton("Export the best model…")
        self.stop_button = QPushButton("Stop sweep")
        self.resume_button = QPushButton("Resume")
        self.open_button.setToolTip("Show the selected trial's run in the main window")
        self.compare_button.setToolTip("The trials' runs side by side: the values tried, their figures and curves")
        self.train_button.setToolTip("Put the best trial's configuration on the forms; press Train to train it")
        self.resume_button.setToolTip("Continue a stopped or killed sweep: open trials go on, then new ones")
        self.open_button.clicked.connect(self.open_selected)
        self.compare_button.clicked.connect(lambda: self.compare_runs.emit(self.run_dirs()))
        self.train_button.clicked.connect(self.train_best)
        self.export_button.clicked.connect(self.export_best)
        self.stop_button.clicked.connect(self.stop)
        self.resume_button.clicked.connect(self.resume)
        buttons = QHBoxLayout()
        for button in (self.open_button, self.compare_button, self.train_button, self.export_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.resume_button)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.table)
        splitter.addWidget(self.charts)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(splitter, 1)
        layout.addWidget(self.message)
        layout.addLayout(buttons)

        self._timer = QTimer(self, singleShot=True, interval=RETRY_MS)
        self._timer.timeout.connect(self.poll)
        self.reader = CurveReader(self)
        self.reader.read.connect(self.charts.show_curves)
        self._update_buttons()
        ScreenFit(self, QSize(1100, 760))  # its buttons stay on a 1280x720 screen
        self.poll()

    # ---- following the sweep ----------------------------------------------------------------
    def poll(self) -> None:
        """Follow the sweep's status (unless the view follows it already)."""
        if self._job is not None:
            return
        self._job = StatusFeed(self._engine_command("sweep", "status", self.sweep_dir, "--json", "--every",
                                                    str(POLL_S)), name="sweep status", parent=self)
        (self._job.on_result(self._on_status).on_failure(self._on_status_failed).on_log_line(self.log_line)
            .on_finished(self._on_status_finished).start())

    def _on_status_finished(self) -> None:
        job, self._job = self._job, None
        if job is not None:
            job.deleteLater()

    def _on_status(self, line: dict) -> None:
        status = decode(SweepStatus, line)
        if status is None:  # a line of another program, or of an engine that lost its sweep_dir
            self._on_status_failed(f"'sweep status' printed no status ({str(line)[:80]!r})")
            return
        self.status = status
        self._fill_table(status)
        self.charts.show_status(status, self.sweep.parameters)
        self.reader.request(self.run_dirs())
        if self._seen_running and not status.running:
            kind, message = outcome(status, self._log_tail())
            self.ended.emit(kind, self.sweep_dir, message)
            self._show_message(message, error=kind == "failed")
        self._seen_running = status.running
        self.header.setText(self._header(status))
        self._update_buttons()

    def _on_status_failed(self, message: str) -> None:
        self._show_message(f"Cannot read the sweep: {message}", error=True)
        self._timer.start()  # try again

    def _log_tail(self) -> list[str]:
        return last_lines(Path(self.sweep_dir) / SWEEP_LOG, 20)

    def _header(self, status: SweepStatus) -> str:
        trials = status.trials
        done = sum(t.state in DONE for t in trials)
        state = ("stopping" if status.stop_asked else "running") if status.running else "not running"
        text = f"{state} — {done} of {self.sweep.trial_budget} trials done, {len(trials) - done} open"
        best = status.best
        if best and best.metric is not None:
            text += f" — best: trial {best.number}, {METRICS[status.metric].lower()} {best.metric:.4f}"
        return text

    def _fill_table(self, status: SweepStatus) -> None:
        keys = [p.key for p in self.sweep.parameters]
        headers = ["Trial", "State", *[label(k) for k in keys], METRICS[status.metric], "Epochs", "Duration",
                   "Runs on"]
        selected = self.selected_trial()
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setRowCount(len(status.trials))
        best = status.best.number if status.best else None
        bold = QFont(self.table.font())
        bold.setBold(True)
        for row, trial in enumerate(status.trials):
            cells = [str(trial.number), trial.state, *[value_text(trial.parameters.get(k, "")) for k in keys],
                     f"{trial.metric:.4f}" if finite(trial.metric) else "", str(trial.epochs),
                     duration_text(trial.duration), _place(trial)]
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, trial.number)
                if trial.message:
                    item.setToolTip(trial.message)
                if trial.number == best:
                    item.setFont(bold)
                self.table.setItem(row, column, item)
            if trial.number == selected:
                self.table.selectRow(row)
        self.table.resizeColumnsToContents()

    # ---- the buttons ----------------------------------------------------------------------------
    def selected_trial(self) -> int | None:
        # The stubs say selectionModel() is never None; Qt returns null before a model is set.
        selection = cast("QItemSelectionModel | None", self.table.selectionModel())
        rows = selection.selectedRows() if selection is not None else []
        item = self.table.item(rows[0].row(), 0) if rows else None
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def _trial(self, number: int | None) -> SweepTrial | None:
        return self.status.trial(number) if self.status and number is not None else None

    def run_dirs(self) -> list[str]:
        """The run directories here of the trials (trials that never started have none; a trial on
        an SSH host keeps its run there: compared and drawn only from here)."""
        return [t.run_dir for t in (self.status.trials if self.status else []) if t.run_dir and not t.host]

    def best(self) -> SweepTrial | None:
        return self.status.best if self.status else None

    def open_selected(self) -> None:
        trial = self._trial(self.selected_trial())
        if trial and trial.run_dir:
            self.open_run.emit(_run_key(trial))

    def best_config(self) -> RunConfig | None:
        best = self.best()
        return self.sweep.trial_config(best.parameters) if best else None

    def train_best(self) -> None:
        try:
            config = self.best_config()
        except ConfigError as exc:  # (the sweep file checked every value: not expected)
            self._show_message(str(exc), error=True)
            return
        best = self.best()
        if config is not None and best is not None:  # (a config comes only from a best trial)
            self.train_config.emit(config)
            self._show_message(f"The forms hold trial {best.number}'s configuration: press Train.")

    def export_best(self) -> None:
        best = self.best()
        if best and best.run_dir:
            self.export_run.emit(_run_key(best))

    def stop(self) -> None:
        self._run_action(("sweep", "stop", self.sweep_dir), "Stopping the sweep and its trials…",
                         "Stopped; each trial wrote a checkpoint. Resume continues the sweep.")

    def resume(self) -> None:
        self._run_action(("sweep", "resume", self.sweep_dir, "--detach"), "Resuming the sweep…",
                         "The sweep runs again.")

    def _run_action(self, command: tuple[str, ...], doing: str, done: str) -> None:
        if self._action is not None:
            return
        self._show_message(doing)
        self._action = DetachedStart(self._engine_command(*command), parent=self)
        self._action.name = " ".join(command[:2])
        (self._action.on_result(lambda _line: self._show_message(done))
            .on_failure(lambda message: self._show_message(message, error=True)).on_log_line(self.log_line)
            .on_finished(self._on_action_finished).start())
        self._update_buttons()

    def _on_action_finished(self) -> None:
        action, self._action = self._action, None
        if action is not None:
            action.deleteLater()
        self._update_buttons()
        self.poll()

    def _update_buttons(self) -> None:
        running = bool(self.status and self.status.running)
        trial, best = self._trial(self.selected_trial()), self.best()
        self.open_button.setEnabled(bool(trial and trial.run_dir))
        self.compare_button.setEnabled(len(self.run_dirs()) >= 2)
        self.train_button.setEnabled(best is not None)
        self.export_button.setEnabled(bool(best and best.run_dir))
        self.stop_button.setEnabled(running and self._action is None and not (self.status and self.status.stop_asked))
        self.resume_button.setEnabled(not running and self._action is None and self._unfinished())

    def _unfinished(self) -> bool:
        """Trials left open (stopped, or running without the sweep's process) or budget left."""
        trials = self.status.trials if self.status else []
        done = sum(t.state in DONE for t in trials)
        return self.status is not None and (done < len(trials) or done < self.sweep.trial_budget)

    def _show_message(self, text: str, error: bool = False) -> None:
        self.message.setStyleSheet(ERROR_STYLE if error else "")
        self.message.setText(text)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        """The sweep goes on; the view stops following it."""
        self._timer.stop()
        if self._job is not None:
            self._job.cancel(wait=True)  # (a status process, ended by SIGTERM in milliseconds)
        self.reader.close()
        super().closeEvent(event)


def _run_key(trial: SweepTrial) -> str:
    """How the window names a trial's run: its folder here, or ``HOST:RUN_DIR`` (core/ssh_hosts.py)."""
    return run_key(trial.host, trial.run_dir or "")


def _place(trial: SweepTrial) -> str:
    if trial.job:
        return f"Slurm job {trial.job}: {trial.job_state or 'unknown'}"
    if trial.host:
        return trial.host
    return f"GPU {trial.device}" if trial.device else "this machine"


TAIL_BYTES = 64 << 10  # what the GUI thread reads of a sweep's log: its end (the log grows with every trial)


def last_lines(path: Path, count: int) -> list[str]:
    """The last ``count`` lines of ``path`` from its last :data:`TAIL_BYTES` only ([] when unreadable)."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - TAIL_BYTES))
            data = f.read()
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first is cut
    return lines[-count:]
