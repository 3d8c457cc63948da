"""What kind of file the user hands the app (a drop, a file dialog, a command's argument): a
model it can open -- which kind, and what to load for it -- or an image it can classify.
TensorFlow-free: the window sorts its drops with it.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

from gui_app.core.rundir import MODEL_FILE, is_run_dir

# What the app can open as a model, by file name ending (folders: SavedModel or run).
MODEL_SUFFIXES = {".keras": "keras", ".tflite": "tflite", ".onnx": "onnx"}
SAVED_MODEL_FILE = "saved_model.pb"  # what makes a folder a SavedModel
# The images TensorFlow's decode_image reads: what image folders, the Try tab and predict take.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")


def is_image_file(path: str | Path) -> bool:
    path = Path(path)
    return path.suffix.lower() in IMAGE_SUFFIXES and not path.is_dir()


def model_kind(path: str | Path) -> str | None:
    """What kind of model ``path`` is, by its name and folder layout: ``run`` (a run folder
    with a trained model), ``savedmodel``, ``keras``, ``tflite``, ``onnx``; None when it is
    none of these (or a run that has not finished training)."""
    path = Path(path)
    if path.is_dir():
        if (path / SAVED_MODEL_FILE).is_file():
            return "savedmodel"
        return "run" if is_run_dir(path) and (path / MODEL_FILE).is_file() else None
    return MODEL_SUFFIXES.get(path.suffix.lower())


def model_source(path: str | Path) -> Path:
    """What to load for a chosen file: a SavedModel's ``saved_model.pb`` means its folder, and
    a run's ``model.keras`` means the run (which adds the softmax and the class names the bare
    file lacks: it outputs logits and has no model card)."""
    path = Path(path)
    if path.name == SAVED_MODEL_FILE or (path.name == MODEL_FILE and is_run_dir(path.parent)):
        return path.parent
    return path


def keras_file_problem(path: str | Path) -> str | None:
    """Why ``path``, a file that exists, cannot be a Keras model file, or None when it may be
    one. Keras 3 says "File not found" of any ``.keras`` file that is not a zip archive -- a text
    file, a Keras 2 HDF5 file renamed -- so the loaders ask this first and name what the file is."""
    path = Path(path)
    if not path.is_file() or zipfile.is_zipfile(path):
        return None
    with path.open("rb") as f:
        head = f.read(4096)
    if not head:
        what = "empty"
    elif head.startswith(HDF5_SIGNATURE):
        what = "an HDF5 file (the Keras 2 format)"
    elif _is_text(head):
        what = "text"
    else:
        what = "neither"
    return f"{path} is not a Keras model file (a .keras file is a zip archive; this one is {what})"


HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _is_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a multi-byte character cut at the end of the sample is still text
        return exc.start >= len(head) - 3
    return True
