"""ScalingDialog (Tools -> Scaling benchmark): how the current dataset, model and global batch
train under each strategy and replica count, measured by short timed bursts of real runs.

    dialog = ScalingDialog(config, parent=window)      # the config on the forms
    dialog.open()                                      # Run; or open_report(path) for a saved one

The measuring is ``replica-studio scaling CONFIG --json``, an engine job
(gui_app.ui.dialogs.job_dialog): each burst is its own engine process, so nothing here touches
TensorFlow. Its progress lines move the progress bar; its last line is the report
(gui_app.core.scaling), shown as a table
(examples/s, speed-up, efficiency, where each step's time goes), a chart of the speed-up
against the ideal line, and the recommendation. "Also time communication options" adds
``--options``: a second table of option bursts (float16 all-reduce, pack size, ring,
accumulation), each with its speed against a baseline and its effect on the training loss.
The report is saved as JSON, SVG and PNG in the chosen folder and can be opened again later (reports
of version 1, without options, too). Cancel terminates the measuring process.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import (
    QCheckBox,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

import pyqtgraph as pg

from gui_app.core import scaling
from gui_app.core.answers import OptionRow, ScalingReport, decode, encode, reader
from gui_app.core.config import RunConfig
from gui_app.identity import app_command
from gui_app.ui.charts.canvas import ChartCanvas
from gui_app.ui.charts.plot import REPLICA_COLORS, make_plot, style_plot, theme_colors
from gui_app.ui.dialogs.job_dialog import JobDialog, browse_row
from gui_app.ui.workers.engine_job import EngineJob

if TYPE_CHECKING:
    from gui_app.ui.config.config_panel import ConfigPanel

STRATEGY_LABELS = {"one_device": "One device", "mirrored": "Mirrored (1..N replicas)",
                   "multi_worker_mirrored": "Multi-worker mirrored (1..N local workers)",
                   "parameter_server": "Parameter servers (N workers + 1 ps)"}
COLUMNS = ("Configuration", "Examples/s", "Speed-up", "Efficiency", "Compute", "Input", "All-reduce + rest")
OPTION_COLUMNS = ("Communication option", "Examples/s", "vs baseline", "Mean loss", "Δ loss", "All-reduce + rest")


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


class ScalingDialog(JobDialog):
    starting_text = "Starting the first burst (TensorFlow starts in each of them)…"

    def __init__(self, config: RunConfig, parent: QWidget | None = None, folder: str | Path | None = None,
                 engine_command: Callable[..., list[str]] = app_command) -> None:
        super().__init__(parent, engine_command)
        self.setWindowTitle("Scaling benchmark")
        # Room for the report (two tables, the chart, the recommendation); on a small screen (a
        # 1280x720 laptop) what the screen leaves, and the report scrolls inside.
        self.screen_fit.set_preferred(QSize(1000, 820))
        self._config = config
        self._report: ScalingReport | None = None

        self._replicas = QSpinBox(minimum=1, maximum=16, value=2)
        self._steps = QSpinBox(minimum=5, maximum=10_000, value=60, suffix=" steps")
        self._warmup = QSpinBox(minimum=1, maximum=10_000, value=20, suffix=" steps")
        self._eval = QCheckBox("Time distributed evaluation too")
        self._options = QCheckBox("Also time communication options")
        self._options.setToolTip(
            "On mirrored with N replicas and multi-worker with N workers (those ticked above, N ≥ 2): a burst "
            "each with the all-reduce in float16, 64 KiB packs and ring (multi-worker), and 4 accumulated "
            "micro-batches, from the same seed as a baseline burst: examples/s and the loss effect of each")
        self._strategies = {name: QCheckBox(STRATEGY_LABELS[name]) for name in scaling.STRATEGIES}
        for name in scaling.DEFAULT_STRATEGIES:  # what the command line times by default, too
            self._strategies[name].setChecked(True)
        boxes = QVBoxLayout()
        for box in self._strategies.values():
            boxes.addWidget(box)
        self._folder = QLineEdit(str(folder or Path.home() / "replica-studio-scaling"))
        row, browse = browse_row(self._folder, self._on_browse)
        form = QFormLayout()
        form.addRow("Strategies", boxes)
        form.addRow("Up to", self._replicas)
        form.addRow("Timed", self._steps)
        form.addRow("Warm-up (not timed)", self._warmup)
        form.addRow("", self._eval)
        form.addRow("", self._options)
        form.addRow("Save the report in", row)
        self._inputs = (self._replicas, self._steps, self._warmup, self._eval, self._options, self._folder, browse,
                        *self._strategies.values())
        self.form_area.addLayout(form)
        self._show_status(f"{config.dataset.name}, {config.model.name}, global batch "
                          f"{config.training.global_batch_size}: each configuration trains a short burst.")

        self._table = _report_table(COLUMNS)
        self._options_table = _report_table(OPTION_COLUMNS)
        self._options_table.hide()
        self._graphics = ChartCanvas()
        self._plot = make_plot(scaling.speedup_title({}), "replicas", "speed-up")
        self._graphics.addItem(self._plot)
        self._apply_palette()
        self._graphics.hide()  # until there is a report to draw: an empty chart says nothing
        self._recommendation = QLabel(wordWrap=True, textInteractionFlags=Qt.TextInteractionFlag.TextSelectableByMouse)
        # The report scrolls as one page when the dialog is short, rather than squeeze each part.
        report = QWidget()
        column = QVBoxLayout(report)
        column.setContentsMargins(0, 0, 0, 0)
        for widget, rows_high in ((self._table, 140), (self._options_table, 170), (self._graphics, 220)):
            widget.setMinimumHeight(rows_high)  # a few rows each, never a sliver
            column.addWidget(widget, 1)
        column.addWidget(self._recommendation)
        scroll = QScrollArea(widgetResizable=True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(report)
        self.result_area.addWidget(scroll, 1)

        open_button = QPushButton("Open report…")
        open_button.clicked.connect(self._on_open_report)
        self._buttons.addButton(open_button, QDialogButtonBox.ButtonRole.ActionRole)
        self._inputs += (open_button,)  # a report opened while one is measured would be replaced by it

    @classmethod
    def for_forms(cls, forms: ConfigPanel, parent: QWidget,
                  engine_command: Callable[..., list[str]]) -> ScalingDialog | None:
        """The benchmark of the configuration on the forms; None while they have errors."""
        config = forms.config()
        return None if config is None else cls(config, parent, engine_command=engine_command)

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and hasattr(self, "_plot"):  # light/dark, like the chart tabs
            self._apply_palette()

    def _apply_palette(self) -> None:
        background, foreground = theme_colors(self)
        self._graphics.setBackground(background)  # pyqtgraph's default is black, whatever the palette
        style_plot(self._plot, foreground, background)

    # ---- public ------------------------------------------------------------------------------
    def strategies(self) -> list[str]:
        return [name for name, box in self._strategies.items() if box.isChecked()]

    def open_report(self, path: str | Path) -> bool:
        """Show a report saved earlier (scaling.json); False with a message when it cannot be read."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            report = decode(ScalingReport, data)
            if report is None or not isinstance(data.get("rows"), list):
                raise ValueError("not a scaling report")
        except (OSError, ValueError) as exc:
            self._show_status(f"{path}: cannot open the report ({exc})", error=True)
            return False
        self._show_report(report)
        self._show_status(f"Report {path}")
        return True

    # ---- the job -------------------------------------------------------------------------------
    def _make_job(self) -> EngineJob | None:
        if not self.strategies():
            self._show_status("Tick at least one strategy.", error=True)
            return None
        command = self._engine_command(
            "scaling", str(self._config_file(self._config)), "--strategies", ",".join(self.strategies()),
            "--max-replicas", str(self._replicas.value()), "--steps", str(self._steps.value()),
            "--warmup", str(self._warmup.value()), "--output", self._folder.text().strip() or ".", "--json",
            *(["--eval"] if self._eval.isChecked() else []), *(["--options"] if self._options.isChecked() else []))
        self._report = None
        return EngineJob(command, name="the benchmark", answer=ScalingReport.TYPE, read=reader(ScalingReport),
                         parent=self)

    def _show_result(self, report: ScalingReport) -> None:
        self._show_report(report)
        folder = Path(report.path or Path(self._folder.text()) / "scaling.json").parent
        png = save_png(folder / "scaling.svg")
        self._show_status(f"Saved {folder / 'scaling.json'}, scaling.svg" + (" and scaling.png." if png else "."))

    # ---- slots ---------------------------------------------------------------------------------
    def _on_browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Save the report in", self._folder.text())
        if path:
            self._folder.setText(path)

    def _on_open_report(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a scaling report", self._folder.text(),
                                              "Scaling reports (scaling.json *.json)")
        if path:
            self.open_report(path)

    # ---- helpers --------------------------------------------------------------------------------
    def _show_report(self, report: ScalingReport) -> None:
        self._report = report
        self._table.setRowCount(len(report.rows))
        for i, row in enumerate(report.rows):
            split = row.time_split  # None: blank cells
            if row.error:
                cells = [row.label, f"failed: {row.error}", "", "", "", "", ""]
            else:
                speed = row.examples_per_sec
                cells = [row.label, "–" if speed is None else f"{speed:,.0f}",
                         "–" if row.speedup is None else f"{row.speedup:.2f}×",
                         _percent(row.efficiency), _percent(split.compute if split is not None else None),
                         _percent(split.input if split is not None else None),
                         _percent(split.other if split is not None else None)]
            _fill_row(self._table, i, cells)
        self._table.resizeColumnsToContents()
        self._show_options(report.options)  # a version-1 report has none
        self._draw(report)
        self._recommendation.setText(report.recommendation)

    def _show_options(self, rows: list[OptionRow]) -> None:
        self._options_table.setVisible(bool(rows))
        self._options_table.setRowCount(len(rows))
        for i, row in enumerate(rows):
            if row.error:
                cells = [row.label, f"failed: {row.error}", "", "", "", ""]
            else:
                speed, loss, delta = row.examples_per_sec, row.loss, row.loss_vs_baseline
                cells = [row.label, "–" if speed is None else f"{speed:,.0f}",
                         "–" if row.speed_vs_baseline is None else f"{row.speed_vs_baseline:.2f}×",
                         "–" if loss is None else f"{loss:.4f}",
                         ("not comparable" if not row.loss_comparable else
                          "–" if delta is None else f"{delta:+.5f}"),
                         _percent(row.time_split.other if row.time_split else None)]
            _fill_row(self._options_table, i, cells)
        self._options_table.resizeColumnsToContents()

    def _draw(self, report: ScalingReport) -> None:
        rows = report.rows
        self._plot.clear()
        self._plot.setTitle(scaling.speedup_title(encode(report)))
        self._apply_palette()  # the new title in the palette's colour
        self._plot.enableAutoRange()  # a zoom into the last report goes
        self._graphics.show()
        measured = [r for r in rows if r.speedup]
        top = max([r.replicas for r in measured] + [1])
        self._plot.getAxis("bottom").setTicks([[(n, str(n)) for n in range(1, top + 1)]])  # whole replicas only
        self._plot.plot([1, top], [1, top], pen=pg.mkPen("#999", width=1, style=Qt.PenStyle.DashLine), name="ideal")
        families = sorted({r.family for r in measured})
        for n, family in enumerate(families):
            points = sorted((r.replicas, r.speedup or 0.0) for r in measured if r.family == family)
            colour = REPLICA_COLORS[n % len(REPLICA_COLORS)]
            self._plot.plot([p[0] for p in points], [p[1] for p in points], pen=pg.mkPen(colour, width=1),
                            symbol="o", symbolBrush=colour, symbolPen=colour, symbolSize=7, name=family)


def _report_table(columns: tuple[str, ...]) -> QTableWidget:
    """A read-only table whose columns fit their headers from the start (before a report, the
    default width cut "All-reduce + rest")."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(columns)
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.horizontalHeader().setStretchLastSection(True)
    table.resizeColumnsToContents()
    return table


def _fill_row(table: QTableWidget, i: int, cells: list[str]) -> None:
    for j, text in enumerate(cells):
        item = QTableWidgetItem(text)
        if j:
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        table.setItem(i, j, item)


def save_png(svg: Path, scale: float = 2.0) -> Path | None:
    """The report's chart as a PNG beside its SVG (slides and chat take PNG), drawn from the
    same SVG so the two never differ; None when the SVG cannot be read or the PNG written."""
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        return None
    size = renderer.defaultSize() * scale
    image = QImage(size, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    renderer.render(painter)
    painter.end()
    png = svg.with_suffix(".png")
    return png if image.save(str(png)) else None
