"""PNG files for the UI tests, written with Qt (this process never imports TensorFlow)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QImage

import numpy as np


def write_png(path: Path, image: np.ndarray) -> Path:
    """(H, W, 1) uint8 -> a greyscale PNG file."""
    image = np.ascontiguousarray(image[..., 0] if image.ndim == 3 else image, np.uint8)
    height, width = image.shape
    qimage = QImage(image.data, width, height, width, QImage.Format.Format_Grayscale8).copy()
    assert qimage.save(str(path), "PNG"), f"cannot write {path}"
    return path


def digit_like_pngs(folder: Path, count: int = 2, seed: int = 0) -> tuple[list[Path], np.ndarray]:
    """``count`` random 8x8 grey images (the digits model's input) as PNGs; returns paths and pixels.
    Their border is dark, as a digit's background is (a light one is inverted before the digits
    model sees it: gui_app.core.predictions.as_model_expects)."""
    images = np.random.default_rng(seed).integers(0, 256, size=(count, 8, 8, 1), dtype=np.uint8)
    for edge in (np.s_[:, [0, -1]], np.s_[:, :, [0, -1]]):
        images[edge] //= 4
    return [write_png(folder / f"digit{i}.png", image) for i, image in enumerate(images)], images
