"""FileActions: the File side of the main window -- past runs (open, overlay, compare, recent),
configuration files, a new run, and drops.

The contract: it works on the window's state (is a run active, which tab shows, the status
line), the run on screen (ShownRun), the forms, the model actions (for dropped images and
models) and the settings; it never starts or stops a run, and opens files only while the window
is idle, as the menus say. Each run that becomes active goes to the recent runs;
``recent_changed(list)`` carries the new list for the File menu.

A run is read before it is shown: its whole events.jsonl (up to 10,000 steps), or a long run's
pyramid, which its first open builds (gui_app.core.rundir.read_history). Measured here: 6 MB of
events, 1.3 s; a 30 MB run's first open, 4 s. A small run (events of up to
:data:`READ_HERE_BYTES`, some 50 ms of parsing) is read and shown at once; a bigger one is read on
a Background thread and shown when read, the latest Open winning, so the window never freezes.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from gui_app.core.bundle import SUFFIX as BUNDLE_SUFFIX
from gui_app.core.bundle import is_bundle
from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.file_kinds import is_image_file, model_kind
from gui_app.core.history import RunHistory
from gui_app.core.rundir import CONFIG_FILE, events_bytes, is_run_dir, read_history
from gui_app.ui.config.config_panel import ConfigPanel, first_launch_config
from gui_app.ui.dialogs.compare import CompareDialog
from gui_app.ui.settings import Settings
from gui_app.ui.window.bundle_open import BundleOpen
from gui_app.ui.window.model_actions import ModelActions
from gui_app.ui.window.shown_run import ShownRun
from gui_app.ui.window.window_state import DATASET, EVALUATION, STATE_TEXT, TRAINING, TRY, WindowState
from gui_app.ui.workers.background import Background, Send

READ_HERE_BYTES = 256 << 10  # events read on the GUI thread at most (a 10-step run's are 6 KB)


class FileActions(QObject):
    recent_changed = Signal(list)

    def __init__(self, window: QWidget, state: WindowState, *, shown: ShownRun, forms: ConfigPanel,
                 models: ModelActions, settings: Settings) -> None:
        super().__init__(window)
        self._window, self._state, self._shown, self._forms = window, state, shown, forms
        self._models, self._settings = models, settings
        self.bundles = BundleOpen(window, state, self.open_run)  # a run bundle opens as a copy of the run
        self._background = Background(self)
        self._asked = 0  # the Opens asked for: only the latest one is shown
        state.active_run_changed.connect(self._on_active_run_changed)

    # ---- runs ------------------------------------------------------------------------------
    def open_run(self, run_dir: str, overlay: str | None = None) -> bool:
        """Show a finished run's charts (from its events.jsonl) and its evaluation; ``overlay``:
        another run's training curves drawn over them. True when it is shown, or read to be shown
        (a big run: see the module's note)."""
        path = Path(run_dir)
        if not self._state.is_idle():
            self._state.set_status("A run is active: stop it before opening another")
            return False
        if not is_run_dir(path):
            QMessageBox.warning(self._window, "Not a run", f"{path} is not a run directory (it has no {CONFIG_FILE}).")
            return False
        self._asked += 1
        runs = [path, *([Path(overlay)] if overlay else [])]
        if sum(map(events_bytes, runs)) <= READ_HERE_BYTES:
            self._show_read((self._asked, runs, [read_history(run) for run in runs]))
        else:
            self._state.set_status(f"Reading {path.name}…")
            self._background.run(_read_histories, self._asked, runs, deliver=self._show_read_there,
                                 failed=self._on_read_failed, name="open-run")
        return True

    def is_reading(self) -> bool:
        """A big run is being read to be shown."""
        return self._background.busy()

    def _show_read_there(self, read: tuple[int, list[Path], list[RunHistory]]) -> None:
        """A run read on the thread: the latest Open's "Reading RUN…" gives way (it stayed on
        the status line under the run's charts)."""
        if read[0] == self._asked:
            self._state.set_status(STATE_TEXT[self._state.run_state])
        self._show_read(read)

    def _show_read(self, read: tuple[int, list[Path], list[RunHistory]]) -> None:
        asked, runs, histories = read
        if asked != self._asked:  # another Open came meanwhile
            return
        if not self._state.is_idle():  # a run started while this one was read
            return
        has_evaluation = self._shown.show_history(runs[0], histories[0])
        if len(runs) > 1:
            self._shown.overlay(runs[1], histories[1])
        # Stay on the evaluation or the Try tab when the run has one to show; else the charts.
        tab = self._state.tab
        if not ((tab == EVALUATION and has_evaluation) or (tab == TRY and self._state.model_run())):
            self._state.set_tab(TRAINING)
        self._shown.draw_shown()
        self.add_recent(str(runs[0]))

    def _on_read_failed(self, exc: BaseException) -> None:
        self._state.set_status(f"Cannot read the run: {exc}")  # its folder went away meanwhile

    def overlay_runs(self, main_run: str, other_run: str) -> None:
        self.open_run(main_run, overlay=other_run)

    def compare_runs(self, run_dirs: list[str]) -> CompareDialog:
        """The runs side by side, beside the window (non-modal); its Open run opens here."""
        dialog = CompareDialog.for_runs(run_dirs, self._window)
        dialog.open_requested.connect(self.open_run)
        return dialog

    def compare_selected(self) -> None:
        paths = [run.path for run in self._state.selection]
        if len(paths) >= 2:
            self.compare_runs(paths)

    def new_run(self) -> None:
        self._shown.clear()
        self._forms.set_config(first_launch_config(self._forms.devices.gpu_names()))

    def add_recent(self, run_dir: str) -> None:
        self._settings.add_recent_run(run_dir)
        self.recent_changed.emit(list(self._settings.recent_runs))

    def clear_recent(self) -> None:
        self._settings.recent_runs = []
        self.recent_changed.emit([])

    def _on_active_run_changed(self, run_dir: str) -> None:
        if run_dir:
            self.add_recent(run_dir)

    # ---- configuration files -------------------------------------------------------------------
    def load_config_file(self, path: str | Path) -> None:
        """Fill the forms from a run configuration; ConfigError names the problem."""
        self._forms.set_config(RunConfig.load(path))
        self._settings.last_open_dir = str(Path(path).parent)

    def open_run_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self._window, "Open a run", str(self._state.runs_dir))
        if path:
            self.open_run(path)

    def open_bundle_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self._window, "Open a run bundle", self._settings.last_open_dir or "",
                                              f"Run bundles (*{BUNDLE_SUFFIX});;All files (*)")
        if path:
            self.bundles.open(path)

    def load_config_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self._window, "Load a run configuration",
                                              self._settings.last_open_dir or "", "Run configurations (*.json)")
        if path:
            self._load_config_or_warn(path)

    def save_config_dialog(self) -> None:
        config = self._forms.config()
        if config is None:
            return
        path, _ = QFileDialog.getSaveFileName(self._window, "Save the run configuration",
                                              str(Path(self._settings.last_open_dir or Path.home()) / "run.json"),
                                              "Run configurations (*.json)")
        if path:
            try:
                config.save(path)
            except OSError as exc:
                QMessageBox.warning(self._window, "Cannot save the configuration", f"{path}: {exc.strerror or exc}")
                return
            self._settings.last_open_dir = str(Path(path).parent)
            self._state.set_status(f"Configuration saved to {path}")

    def _load_config_or_warn(self, path: str | Path) -> None:
        try:
            self.load_config_file(path)
        except ConfigError as exc:
            QMessageBox.warning(self._window, "Cannot load the configuration", str(exc))

    # ---- drops -----------------------------------------------------------------------------------
    def drop(self, paths: list[str]) -> None:
        """Several images at once are all for the Try tab; otherwise the first path is opened."""
        images = [p for p in paths if is_image_file(p)]
        if images:
            self._models.try_images(images)
        elif paths:
            self.open_dropped(paths[0])

    def open_dropped(self, path: str) -> None:
        """A run folder (or a run bundle) opens the run, a .json loads a configuration, a .keras becomes the
        model to train; an image, a .tflite, .onnx or SavedModel folder goes to the Try tab;
        anything else is taken as a dataset."""
        p = Path(path)
        kind = model_kind(p)
        if is_image_file(p):
            self._models.try_images([path])
        elif kind in ("tflite", "onnx", "savedmodel"):
            self._models.try_model(p)
        elif not self._state.is_idle():
            self._state.set_status("A run is active: drop files once it has finished")
        elif p.is_dir() and is_run_dir(p):
            self.open_run(path)
        elif p.is_file() and is_bundle(p):
            self.bundles.open(path)
        elif p.suffix.lower() == ".json":
            self._load_config_or_warn(p)
        elif kind == "keras":
            self._forms.model.open_path(p)
        else:
            self._forms.dataset.open_path(p)
            self._state.set_tab(DATASET)


def _read_histories(send: Send, asked: int, runs: list[Path]) -> None:
    """On a Background thread: the runs' histories, for :meth:`FileActions._show_read`."""
    send((asked, runs, [read_history(run) for run in runs]))
