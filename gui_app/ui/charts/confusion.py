"""The confusion-matrix heat map of the evaluation view.

A pyqtgraph ImageItem coloured by the row-normalised matrix (the share of each true class,
so rare classes read as well as common ones), with the counts written in the cells while
they are large enough to hold them: 10x10 yes, 100x100 (CIFAR-100) no; there the view can be
zoomed and the cell under the mouse is named in ``hover`` below the map. Tick labels thin
out so class names never overlap.
"""
from __future__ import annotations

import math

from PySide6.QtGui import QColor, QFontMetrics
from PySide6.QtWidgets import QLabel

import numpy as np
import pyqtgraph as pg

from gui_app.ui.charts.canvas import ChartCanvas
from gui_app.ui.charts.plot import style_plot

TEXT_CELLS_LIMIT = 30  # beyond this many classes no cell text is created at all


class ConfusionHeatmap(ChartCanvas):
    """Rows = true class (top to bottom), columns = predicted class; counts in the cells."""

    def __init__(self) -> None:
        super().__init__()
        self.plot = self.addPlot(title="Confusion matrix")
        self.plot.setLabel("left", "true class")
        self.plot.setLabel("bottom", "predicted class")
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.plot.hideButtons()
        self.plot.setMenuEnabled(False)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setColorMap(pg.colormap.get("viridis"))
        self.plot.addItem(self.image)
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap="viridis", interactive=False,
                                        label="share of the true class", width=14)
        self.colorbar.setImageItem(self.image)
        self.addItem(self.colorbar)
        self.hover = QLabel()
        self.matrix: np.ndarray | None = None
        self._names: list[str] = []
        self._texts: list[pg.TextItem] = []
        self._share = np.zeros((0, 0))  # the matrix's rows as shares of the true class
        self._cells_written = True  # the counts in the cells are those of ``matrix``
        self.plot.vb.sigResized.connect(self._fit_labels)
        self.plot.vb.sigRangeChanged.connect(self._fit_labels)
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)

    def set_matrix(self, matrix: np.ndarray | None, names: list[str]) -> None:
        n = 0 if matrix is None else len(matrix)
        self.matrix, self._names = matrix, names
        self.hover.setText("")
        if matrix is None:
            self._remove_cells()
            self.image.clear()
            for axis in ("left", "bottom"):
                self.plot.getAxis(axis).setTicks([[]])
            return
        totals = matrix.sum(axis=1, keepdims=True)
        self._share = np.divide(matrix, totals, out=np.zeros(matrix.shape), where=totals > 0)
        self.image.setImage(self._share, levels=(0, 1))
        self.image.setRect(0, 0, n, n)
        self.plot.setMouseEnabled(x=n > TEXT_CELLS_LIMIT, y=n > TEXT_CELLS_LIMIT)  # zoom only big ones
        self.plot.setRange(xRange=(0, n), yRange=(0, n), padding=0)
        # The counts are written when the map is on screen: an Open shows the Training tab, and
        # the first 100 cell labels of a window cost it 0.1-0.2 s there.
        self._cells_written = False
        if self.isVisible():
            self._write_cells()
        self._fit_labels()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if not self._cells_written:
            self._write_cells()
            self._fit_labels()

    def _remove_cells(self) -> None:
        for text in self._texts:
            self.plot.removeItem(text)
        self._texts.clear()

    def _write_cells(self) -> None:
        """The count in each cell (while there are few enough classes), made once per size."""
        self._cells_written = True
        matrix = self.matrix
        n = 0 if matrix is None else len(matrix)
        reuse = n <= TEXT_CELLS_LIMIT and len(self._texts) == n * n > 0
        if not reuse:  # a new size: new cell labels (creating 100 TextItems took 70 ms)
            self._remove_cells()
        if matrix is None or n > TEXT_CELLS_LIMIT:
            return
        for (row, col), count in np.ndenumerate(matrix):
            # Light text on the dark (low) end of viridis, dark text on the bright end.
            color = "#111111" if self._share[row, col] > 0.6 else "#f0f0f0"
            if reuse:
                self._texts[row * n + col].setText(str(count), color=color)
                continue
            text = pg.TextItem(str(count), color=color, anchor=(0.5, 0.5))
            text.setPos(col + 0.5, row + 0.5)
            self.plot.addItem(text)
            self._texts.append(text)

    def _fit_labels(self, *_) -> None:
        """Ticks every k classes so names do not overlap; cell text only when it fits."""
        if self.matrix is None:
            return
        n = len(self._names)
        view = self.plot.vb.viewRect()
        size = self.plot.vb.size()
        if view.width() <= 0 or size.width() <= 0:
            return
        cell_w, cell_h = size.width() / view.width(), size.height() / view.height()
        metrics = QFontMetrics(self.plot.getAxis("bottom").style.get("tickFont") or self.font())
        widest = max(metrics.horizontalAdvance(name) for name in self._names)
        names_fit = widest + 6 <= cell_w
        every_y = _nice_step((metrics.height() + 2) / max(cell_h, 1e-6))
        every_x = every_y if names_fit else _nice_step(metrics.horizontalAdvance(str(n)) * 1.6 / cell_w)
        left = [(i + 0.5, name if names_fit else f"{i} {name}") for i, name in enumerate(self._names)
                if i % every_y == 0]
        bottom = [(i + 0.5, name if names_fit else str(i)) for i, name in enumerate(self._names)
                  if i % every_x == 0]
        self.plot.getAxis("left").setTicks([left])
        self.plot.getAxis("bottom").setTicks([bottom])
        fits = metrics.horizontalAdvance(str(int(self.matrix.max()))) + 4 <= cell_w and metrics.height() <= cell_h
        for text in self._texts:
            text.setVisible(fits)

    def _on_mouse_moved(self, pos) -> None:
        if self.matrix is None or not self.plot.sceneBoundingRect().contains(pos):
            return
        point = self.plot.vb.mapSceneToView(pos)
        row, col = int(math.floor(point.y())), int(math.floor(point.x()))
        n = len(self.matrix)
        if 0 <= row < n and 0 <= col < n:
            count, total = int(self.matrix[row, col]), int(self.matrix[row].sum())
            share = f" ({100.0 * count / total:.1f}% of {self._names[row]})" if total else ""
            self.hover.setText(f"true {self._names[row]}, predicted {self._names[col]}: {count}{share}")

    def apply_palette(self, background: QColor, foreground: QColor) -> None:
        self.setBackground(background)
        style_plot(self.plot, foreground, background)
        style_plot(self.colorbar, foreground, background)  # a ColorBarItem is a PlotItem
        axis = self.colorbar.getAxis("left")
        axis.setLabel(axis.labelText, color=foreground)


def _nice_step(minimum: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 25, 50, 100, ... that is >= ``minimum``."""
    scale = 1
    while True:
        for step in (1, 2, 5, 10, 20, 25, 50):
            if step * scale >= minimum:
                return step * scale
        scale *= 100
