"""ModelForm: which architecture to train (``RunConfig.model``), its size and its layers."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QWidget,
)

from gui_app.core.config import ConfigError, ModelConfig
from gui_app.ui.config.form_base import FormSection, choice_box

MODEL_LABELS = {
    "mnist_cnn": "Small CNN (MNIST-sized images)",
    "cifar_cnn": "CNN (CIFAR-sized images)",
    "mlp": "Multi-layer perceptron",
    "resnet20": "ResNet-20",
    "mobilenet_v2": "MobileNetV2",
    "keras_file": "Architecture from a .keras file",
}


MAX_LAYER_ROWS = 10


def _shape(shape: object) -> str:
    """``[None, 6, 6, 32]`` -> ``6×6×32``: the batch dimension is always None, so it is left out."""
    if isinstance(shape, (list, tuple)):
        dims = list(shape[1:]) if shape and shape[0] is None else list(shape)
        return "×".join("?" if d is None else str(d) for d in dims) or "scalar"
    return "" if shape is None else str(shape)


class ModelForm(FormSection):
    section = "model"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = choice_box(MODEL_LABELS)
        self.add_field("model.name", self.name)

        self.path = QLineEdit(placeholderText="a .keras file")
        self.path.setClearButtonEnabled(True)
        self.open_button = QPushButton("Open .keras…")
        self.open_button.clicked.connect(self._open_keras)
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.path, 1)
        layout.addWidget(self.open_button)
        self.add_field("model.path", self.path, row_widget=row)

        self.parameters = QLabel("—")
        self.parameters.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.form.addRow("Parameters", self.parameters)
        self.layers = QTreeWidget()
        self.layers.setHeaderLabels(["Layer", "Type", "Output shape", "Parameters"])
        self.layers.setRootIsDecorated(False)
        self.layers.setAlternatingRowColors(True)
        self.layers.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # The name column gets what the panel leaves: cut in the middle ("max_p…2d_1" tells the
        # layers apart), each cell whole in its tooltip.
        self.layers.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.layers.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self._fit_layers()
        self.form.addRow(self.layers)
        self.add_status()

        self.name.currentIndexChanged.connect(self._on_edited)
        self.path.textChanged.connect(self._on_edited)
        self.last_dir = ""
        self.set_config_section(ModelConfig())

    def config_section(self) -> ModelConfig:
        name = self.name.currentData()
        path = self.path.text().strip()
        if name == "keras_file" and path.endswith(".keras") and not Path(path).expanduser().is_file():
            raise ConfigError(f"model.path: no such file: {path}")
        return ModelConfig(name=name, path=(self.path.text().strip() or None) if name == "keras_file" else None)

    def set_config_section(self, section: ModelConfig) -> None:
        self.blockSignals(True)
        try:
            self.name.setCurrentIndex(self.name.findData(section.name))
            self.path.setText(section.path or "")
        finally:
            self.blockSignals(False)
        self._on_edited()

    def open_path(self, path: str | Path) -> None:
        self.name.setCurrentIndex(self.name.findData("keras_file"))
        self.path.setText(str(path))
        self.last_dir = str(Path(path).parent)

    def _open_keras(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a Keras model", self.last_dir, "Keras models (*.keras)")
        if path:
            self.open_path(path)

    def _on_edited(self, *_: object) -> None:
        self.path.setEnabled(self.name.currentData() == "keras_file")
        if not self.signalsBlocked():
            self.changed.emit()

    # ---- inspection results ----------------------------------------------------------
    def mark_stale(self) -> None:
        """The summary shown is of another dataset or model: greyed until the check answers."""
        self.parameters.setEnabled(False)
        self.layers.setEnabled(False)

    def show_summary(self, model: dict | None) -> None:
        """Show the ``model`` part of ``inspect --json`` (or clear it with ``None``)."""
        self.parameters.setEnabled(True)
        self.layers.setEnabled(True)
        self.layers.clear()
        if not model:
            self.parameters.setText("—")
            self._fit_layers()
            return
        total, trainable = model.get("parameters"), model.get("trainable_parameters")
        text = f"{total:,}" if isinstance(total, int) else "—"
        if isinstance(trainable, int) and trainable != total:
            text += f" ({trainable:,} trainable)"
        self.parameters.setText(text)
        for layer in model.get("layers") or []:
            params = layer.get("parameters")
            item = QTreeWidgetItem([str(layer.get("name", "")), str(layer.get("type", "")),
                                    _shape(layer.get("output_shape")),
                                    f"{params:,}" if isinstance(params, int) else ""])
            item.setTextAlignment(3, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            for column in range(item.columnCount()):
                item.setToolTip(column, item.text(column))
            self.layers.addTopLevelItem(item)
        self._fit_layers()

    def _fit_layers(self) -> None:
        """As tall as its rows, up to MAX_LAYER_ROWS; a deep network scrolls."""
        rows = min(max(self.layers.topLevelItemCount(), 2), MAX_LAYER_ROWS)
        row = self.layers.sizeHintForRow(0) if self.layers.topLevelItemCount() else self.fontMetrics().height() + 4
        self.layers.setFixedHeight(self.layers.header().sizeHint().height() + rows * row + 2 * self.layers.frameWidth())

