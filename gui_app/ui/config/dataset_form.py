"""DatasetForm: which data to train on (``RunConfig.dataset``), plus where it comes from."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from gui_app.core.config import DATASETS_OF_IMAGES, DATASETS_WITH_PATH, ConfigError, DatasetConfig
from gui_app.core.image_files import source_images
from gui_app.core.memory import BUDGET_FRACTION, default_budget_bytes, format_bytes
from gui_app.ui.config.form_base import FormSection, choice_box
from gui_app.ui.config.source_images import SourceImagesRow
from gui_app.ui.labels import ElidedComboBox

DATASET_LABELS = {
    "digits": "Digits (bundled, offline)",
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
    "npz": "NumPy .npz file",
    "idx": "IDX folder (MNIST format)",
    "image_folder": "Image folder (one sub-folder per class)",
    "tfrecord": "TFRecord shards (tf.train.Example)",
    "tfds": "TensorFlow Datasets (prepared on disk)",
}
LOADING_LABELS = {"auto": "Automatic: stream when larger than the memory budget",
                  "memory": "Decode into memory", "stream": "Stream from the files"}
CACHE_LABELS = {"auto": "Automatic: in memory when it fits the budget", "none": "None",
                "memory": "In memory", "file": "A file in the run's data folder"}
TFRECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".tfr")
DOWNLOADABLE = ("mnist", "fashion_mnist", "cifar10", "cifar100")
VALIDATION_LABELS = {"split": "Hold out part of the training set", "test": "Use the test set", "none": "None"}
OPEN_TITLES = {"idx": "Open a folder of IDX files", "image_folder": "Open a folder with one sub-folder per class",
               "tfrecord": "Open a folder of TFRecord shards"}


def guess_dataset(path: str | Path) -> tuple[str, str]:
    """(dataset name, path) for a dropped or opened file or folder; ConfigError if unknown."""
    path = Path(path)
    if path.is_file():
        if path.suffix == ".npz":
            return "npz", str(path)
        if "idx" in path.name and "ubyte" in path.name:
            return "idx", str(path.parent)
        raise ConfigError(f"dataset.path: {path.name} is not a dataset file (expected .npz, an IDX file, or a folder)")
    if not path.is_dir():
        raise ConfigError(f"dataset.path: no such file or folder: {path}")
    names = {p.name for p in path.iterdir()}
    if "manifest.json" in names or any(n.endswith(TFRECORD_SUFFIXES) or "-of-" in n for n in names):
        return "tfrecord", str(path)
    if "data_batch_1" in names:
        return "cifar10", str(path)
    if {"train", "test", "meta"} <= names:
        return "cifar100", str(path)
    if any("idx3-ubyte" in n or "idx1-ubyte" in n for n in names):
        return "idx", str(path)
    if any(p.is_dir() and not p.name.startswith(".") for p in path.iterdir()):
        return "image_folder", str(path)
    raise ConfigError(f"dataset.path: {path} holds no CIFAR batches, IDX files or class sub-folders")


class DatasetForm(FormSection):
    section = "dataset"
    open_failed = Signal(str)  # a file the user chose or dropped is not a dataset

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = choice_box(DATASET_LABELS)
        self.add_field("dataset.name", self.name)

        self.path = QLineEdit()
        self.path.setClearButtonEnabled(True)
        self.open_button = QPushButton("Open…")
        self.open_button.setToolTip("Choose the file or folder of the dataset type above")
        self.open_button.clicked.connect(self._on_open)
        self.add_field("dataset.path", self.path, row_widget=self._row(self.path, self.open_button))

        self.test_path = QLineEdit(placeholderText="optional: a separate folder of test images or shards")
        self.test_path.setClearButtonEnabled(True)
        self.add_field("dataset.test_path", self.test_path)

        # Not self.height/self.width: those would hide QWidget.height() and width().
        self.image_height, self.image_width = QSpinBox(minimum=1, maximum=4096), QSpinBox(minimum=1, maximum=4096)
        size = self._row(self.image_height, QLabel("×"), self.image_width, stretch=True)
        self.add_field("dataset.image_size", self.image_height, row_widget=size,
                       tip="Images of an image folder are resized to height × width")
        self.color_mode = ElidedComboBox()
        self.color_mode.addItem("RGB", "rgb")
        self.color_mode.addItem("Grayscale", "grayscale")
        self.add_field("dataset.color_mode", self.color_mode)
        self.source_images = SourceImagesRow(self._set_image_size)
        self.form.addRow(self.source_images)
        self.label_offset = QSpinBox(minimum=0, maximum=1000)
        self.add_field("dataset.label_offset", self.label_offset,
                       tip="TFRecord: subtracted from image/class/label (1 for ImageNet's 1-based labels)")
        self.tfds_name = QLineEdit(placeholderText="e.g. mnist or my_set:1.0.0")
        self.add_field("dataset.tfds_name", self.tfds_name)
        self.data_dir = QLineEdit(placeholderText="the folder it was prepared in (default ~/tensorflow_datasets)")
        self.add_field("dataset.data_dir", self.data_dir)

        self.loading = choice_box(LOADING_LABELS)
        self.add_field("dataset.loading", self.loading,
                       tip="Image folders, TFRecord and TFDS sets can stream from their files during training")
        budget = format_bytes(default_budget_bytes())
        self.memory_budget = QSpinBox(minimum=0, maximum=10_000_000, singleStep=256, suffix=" MB")
        self.memory_budget.setSpecialValueText(f"Default: {BUDGET_FRACTION * 100:.0f} % of RAM ({budget})")
        self.add_field("dataset.memory_budget_mb", self.memory_budget,
                       tip="A set whose decoded size is larger than this streams (loading: automatic)")
        self.cache = choice_box(CACHE_LABELS)
        self.add_field("dataset.cache", self.cache,
                       tip="Keep decoded training examples after the first pass (streamed input only)")

        self.validation = choice_box(VALIDATION_LABELS)
        self.add_field("dataset.validation", self.validation)
        self.validation_split = QDoubleSpinBox(minimum=0.0, maximum=0.95, singleStep=0.05, decimals=2)
        self.add_field("dataset.validation_split", self.validation_split,
                       tip="Fraction of the training set held out for validation at each epoch end")
        self.test_split = QDoubleSpinBox(minimum=0.0, maximum=0.95, singleStep=0.05, decimals=2)
        self.add_field("dataset.test_split", self.test_split,
                       tip="Image folder without test images: fraction held out for testing")

        self.add_status()  # what the check found or why it failed

        for combo in (self.name, self.color_mode, self.validation, self.loading, self.cache):
            combo.currentIndexChanged.connect(self._on_edited)
        for edit in (self.path, self.test_path, self.tfds_name, self.data_dir):
            edit.textChanged.connect(self._on_edited)
        for spin in (self.image_height, self.image_width, self.validation_split, self.test_split, self.label_offset,
                     self.memory_budget):
            spin.valueChanged.connect(self._on_edited)
        self.last_dir = ""
        self._source_of: tuple[str, str] | None = None  # the (type, path) whose images were read last
        self._shuffle_buffer = DatasetConfig().shuffle_buffer
        self.set_config_section(DatasetConfig())

    @staticmethod
    def _row(*widgets: QWidget, stretch: bool = False) -> QWidget:
        """``widgets`` side by side; ``stretch``: kept at their size, at the left."""
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        for w in widgets:
            layout.addWidget(w, 1 if isinstance(w, QLineEdit) else 0)
        if stretch:
            layout.addStretch(1)
        return row

    # ---- RunConfig section -----------------------------------------------------------
    def config_section(self) -> DatasetConfig:
        name = self.name.currentData()
        folder = name in ("image_folder", "tfrecord")
        section = DatasetConfig(
            name=name,
            path=(self.path.text().strip() or None) if name not in ("digits", "tfds") else None,
            test_path=(self.test_path.text().strip() or None) if folder else None,
            image_size=(self.image_height.value(), self.image_width.value()),
            color_mode=self.color_mode.currentData(),
            validation_split=round(self.validation_split.value(), 4),
            validation=self.validation.currentData(),
            test_split=round(self.test_split.value(), 4),
            loading=self.loading.currentData(),
            memory_budget_mb=self.memory_budget.value() or None,
            cache=self.cache.currentData(),
            label_offset=self.label_offset.value() if name == "tfrecord" else 0,
            tfds_name=(self.tfds_name.text().strip() or None) if name == "tfds" else None,
            data_dir=(self.data_dir.text().strip() or None) if name == "tfds" else None,
            shuffle_buffer=self._shuffle_buffer,
        )
        for key, path in (("dataset.path", section.path), ("dataset.test_path", section.test_path),
                          ("dataset.data_dir", section.data_dir)):
            if path and not Path(path).expanduser().exists():
                raise ConfigError(f"{key}: no such file or folder: {path}")
        return section

    def set_config_section(self, section: DatasetConfig) -> None:
        self.blockSignals(True)
        try:
            self.name.setCurrentIndex(self.name.findData(section.name))
            self.path.setText(section.path or "")
            self.test_path.setText(section.test_path or "")
            self.image_height.setValue(section.image_size[0])
            self.image_width.setValue(section.image_size[1])
            self.color_mode.setCurrentIndex(self.color_mode.findData(section.color_mode))
            self.validation.setCurrentIndex(self.validation.findData(section.validation))
            self.validation_split.setValue(section.validation_split)
            self.test_split.setValue(section.test_split)
            self.loading.setCurrentIndex(self.loading.findData(section.loading))
            self.memory_budget.setValue(section.memory_budget_mb or 0)
            self.cache.setCurrentIndex(self.cache.findData(section.cache))
            self.label_offset.setValue(section.label_offset)
            self.tfds_name.setText(section.tfds_name or "")
            self.data_dir.setText(section.data_dir or "")
            self._shuffle_buffer = section.shuffle_buffer  # kept as loaded: no field for it
            self.follow_source_images(may_fill=False)  # a loaded size is the user's: proposed, never replaced
        finally:
            self.blockSignals(False)
        self._on_edited()

    # ---- opening files ---------------------------------------------------------------
    def open_path(self, path: str | Path) -> bool:
        """Use a file or folder as the dataset (Open… and drag-and-drop)."""
        try:
            name, path = guess_dataset(path)
        except ConfigError as exc:
            self.open_failed.emit(str(exc))
            return False
        self.name.setCurrentIndex(self.name.findData(name))
        self.path.setText(path)
        self.last_dir = str(Path(path).parent)
        return True

    def _on_open(self) -> None:
        """The chooser of the type chosen above: a file for an .npz, a folder for the others;
        a downloadable set's local copy may be either (a file inside a folder stands for it)."""
        name = self.name.currentData()
        if name == "npz":
            path, _ = QFileDialog.getOpenFileName(self, "Open a NumPy dataset", self.last_dir,
                                                  "NumPy archives (*.npz);;All files (*)")
        elif name in DOWNLOADABLE:
            path, _ = QFileDialog.getOpenFileName(
                self, f"Open a local copy of {DATASET_LABELS[name]}", self.last_dir,
                "mnist.npz, an IDX file or a CIFAR archive (*.npz *ubyte *ubyte.gz *.tar.gz);;"
                "A file of the CIFAR batches folder (*);;All files (*)")
            if path and not path.endswith((".npz", ".tar.gz")):
                path = str(Path(path).parent)  # an IDX file or a CIFAR batch: its folder is the dataset
        else:
            path = QFileDialog.getExistingDirectory(self, OPEN_TITLES.get(name, "Open a folder"), self.last_dir)
        if path:
            self.path.setText(path)
            self.last_dir = str(Path(path).parent)

    # ---- the images as they are ------------------------------------------------------
    def follow_source_images(self, may_fill: bool = True) -> None:
        """Read the chosen images' headers when the type or path changed, and set or propose
        their size and colour (SourceImagesRow). Cheap: a few headers per class."""
        key = (self.name.currentData(), self.path.text().strip())
        if key == self._source_of:
            return
        self._source_of = key
        info = source_images(*key) if key[0] in ("image_folder", "tfrecord") else None
        self.source_images.follow(info, self._image_size(), may_fill)

    def show_source_images(self, info: dict | None) -> None:
        """The inspection's ``source_images``, about the sections on the form."""
        if info:
            self.source_images.follow(info, self._image_size())

    def _image_size(self) -> tuple[int, int, str]:
        return self.image_height.value(), self.image_width.value(), self.color_mode.currentData()

    def _set_image_size(self, height: int, width: int, color_mode: str) -> None:
        self.blockSignals(True)  # one change, told once
        try:
            self.image_height.setValue(height)
            self.image_width.setValue(width)
            self.color_mode.setCurrentIndex(self.color_mode.findData(color_mode))
        finally:
            self.blockSignals(False)
        self._on_edited()

    # ---- applicability ---------------------------------------------------------------
    def _on_edited(self, *_: object) -> None:
        name = self.name.currentData()
        folder = name in ("image_folder", "tfrecord")
        images = name in DATASETS_OF_IMAGES
        self.show_row("dataset.path", name not in ("digits", "tfds"))
        self.path.setPlaceholderText(
            "required" if name in DATASETS_WITH_PATH else
            "optional: a local copy (otherwise downloaded once)" if name in DOWNLOADABLE else "bundled with the app")
        self.show_row("dataset.test_path", folder)
        for key in ("dataset.image_size", "dataset.color_mode", "dataset.loading", "dataset.cache"):
            self.show_row(key, images)
        self.image_width.setEnabled(images)  # image_size's row holds both spin boxes
        self.show_row("dataset.memory_budget_mb", images)
        self.memory_budget.setEnabled(images and self.loading.currentData() == "auto")
        self.show_row("dataset.label_offset", name == "tfrecord")
        self.show_row("dataset.tfds_name", name == "tfds")
        self.show_row("dataset.data_dir", name == "tfds")
        self.validation_split.setEnabled(self.validation.currentData() == "split")
        self.show_row("dataset.test_split", images)
        self.test_split.setEnabled(images and not (folder and self.test_path.text().strip()))
        if not self.signalsBlocked():
            self.changed.emit()
