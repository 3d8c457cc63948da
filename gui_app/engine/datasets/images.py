"""``image_folder``: one sub-folder of images per class, like
``keras.utils.image_dataset_from_directory`` expects.

Images are decoded once, up front, into one uint8 array: the datasets this app trains on fit
in memory, and decoding up front turns a broken file into a counted warning now instead of an
error in the middle of an epoch. TensorFlow does the decoding (no Pillow dependency) and is
imported here only, when a folder is actually loaded. Note that eager TensorFlow ops start the
TensorFlow runtime: call this after the logical devices (and any multi-worker strategy) exist.
"""
from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import numpy as np

from gui_app.core.config import MAX_IMAGE_PIXELS, DatasetConfig
from gui_app.core.file_kinds import IMAGE_SUFFIXES
from gui_app.engine.datasets.base import (
    Dataset,
    DatasetError,
    ProgressCallback,
    Throttle,
    few,
    make_dataset,
    require_path,
    stratified_split,
)
from gui_app.engine.datasets.image_header import MAX_IMAGE_BYTES, too_large


def load_image_folder(cfg: DatasetConfig, progress: ProgressCallback | None = None) -> Dataset:
    root = require_path(cfg.path, "dataset 'image_folder'")
    train_files, class_names, ignored = scan_class_folders(root)
    test_root = None
    if cfg.test_path:
        test_root = require_path(cfg.test_path, "dataset.test_path")
        test_files, test_classes, test_ignored = scan_class_folders(test_root)
        if test_classes != class_names:
            missing = sorted(set(class_names) - set(test_classes))
            extra = sorted(set(test_classes) - set(class_names))
            detail = "; ".join(p for p in (f"missing {few(missing)}" if missing else "",
                                           f"extra {few(extra)}" if extra else "") if p)
            raise DatasetError(f"{test_root}: its class folders differ from those of {root}: {detail}")
        ignored += test_ignored

    warnings = []
    if ignored:
        warnings.append(f"ignored {len(ignored)} files that are not images (by extension): {few(ignored)}")
    channels = 3 if cfg.color_mode == "rgb" else 1
    decode = _Decoder(cfg.image_size, channels, Throttle(progress), cfg.max_image_pixels)
    n_train = sum(map(len, train_files.values()))
    total = n_train + (sum(map(len, test_files.values())) if test_root else 0)
    x, y, failed = decode(root, train_files, class_names, 0, total)
    if test_root:
        x_test, y_test, failed_test = decode(test_root, test_files, class_names, n_train, total)
        failed += failed_test
    large = [name for name in failed if name in decode.too_large]
    failed = [name for name in failed if name not in decode.too_large]
    if large:
        warnings.append(f"skipped {len(large)} images too large to decode safely (over "
                        f"{cfg.max_image_pixels:,} pixels or {MAX_IMAGE_BYTES:,} bytes): {few(large)}")
    if failed:
        warnings.append(f"skipped {len(failed)} images that could not be decoded: {few(failed)}")
    _check_every_class(y, class_names, root, large)
    if test_root:
        _check_every_class(y_test, class_names, test_root, large)
    else:
        train_idx, test_idx = stratified_split(y, cfg.test_split)
        if len(test_idx) == 0:
            raise DatasetError(f"{root}: too few images to hold out a test set (every class has one image); "
                               f"add images or set dataset.test_path")
        x, y, x_test, y_test = x[train_idx], y[train_idx], x[test_idx], y[test_idx]
    return make_dataset("image_folder", str(root), x, y, x_test, y_test, class_names, warnings)


def scan_class_folders(root: Path) -> tuple[dict[str, list[Path]], list[str], list[str]]:
    """The image files of each class folder (sorted), the class names, ignored non-images."""
    if not root.is_dir():
        raise DatasetError(f"{root}: expected a folder with one sub-folder of images per class")
    entries = sorted(p for p in root.iterdir() if not p.name.startswith("."))
    class_dirs = [p for p in entries if p.is_dir()]
    if not class_dirs:
        if any(p.suffix.lower() in IMAGE_SUFFIXES for p in entries):
            raise DatasetError(f"{root}: holds images but no class sub-folders; put each class's images "
                               f"in a sub-folder named after the class")
        if entries:
            raise DatasetError(f"{root}: has no class sub-folders, only other files "
                               f"({few([p.name for p in entries])}); "
                               f"expected one sub-folder of images per class")
        raise DatasetError(f"{root}: the folder is empty; expected one sub-folder of images per class")
    if len(class_dirs) < 2:
        raise DatasetError(f"{root}: has one class folder ({class_dirs[0].name}); a classifier needs at least "
                           "two, one sub-folder of images per class")
    files: dict[str, list[Path]] = {}
    ignored = [p.name for p in entries if p.is_file()]
    for folder in class_dirs:
        found = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
        files[folder.name] = [p for p in found if p.suffix.lower() in IMAGE_SUFFIXES]
        ignored += [str(p.relative_to(root)) for p in found if p.suffix.lower() not in IMAGE_SUFFIXES]
        if not files[folder.name]:
            raise DatasetError(f"{folder}: class folder has no images ({', '.join(IMAGE_SUFFIXES)})")
    return files, [d.name for d in class_dirs], ignored


def _check_every_class(y: np.ndarray, class_names: list[str], root: Path, large: Sequence[str] = ()) -> None:
    empty = [name for i, name in enumerate(class_names) if not np.any(y == i)]
    if empty:
        too_big = sum(1 for name in large if Path(name).parts[0] == empty[0])
        why = f" ({too_big} too large to decode safely)" if too_big else ""
        raise DatasetError(f"{root / empty[0]}: none of the class's images could be decoded{why}")


class _Decoder:
    """Decodes files into (N, H, W, C) uint8 at one size, on a few threads (TensorFlow ops
    release the GIL) through one traced function: about 4x faster than eager ops per image."""

    def __init__(self, size: tuple[int, int], channels: int, report: Throttle,
                 max_pixels: int = MAX_IMAGE_PIXELS) -> None:
        import tensorflow as tf

        self.max_pixels = max_pixels
        self.too_large: set[str] = set()  # relative names of the files skipped for their size
        self._errors = (tf.errors.OpError, OSError, ValueError)
        self._size = size
        self._channels = channels
        self._report = report
        self._decode = image_decoder(size, channels)

    def __call__(self, root: Path, files: dict[str, list[Path]], class_names: list[str],
                 done: int, total: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
        jobs = [(label, path) for label, name in enumerate(class_names) for path in files[name]]
        images, labels, failed = [], [], []
        with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
            for (label, path), image in zip(jobs, pool.map(self._one, (path for _, path in jobs))):
                if image is None or isinstance(image, str):
                    failed.append(str(path.relative_to(root)))
                    if isinstance(image, str):
                        self.too_large.add(failed[-1])
                else:
                    images.append(image)
                    labels.append(label)
                done += 1
                self._report("decode", str(root), done, total)
        x = np.stack(images) if images else np.zeros((0, *self._size, self._channels), np.uint8)
        return x, np.asarray(labels, np.int64), failed

    def _one(self, path: Path) -> np.ndarray | str | None:
        """The image, the reason it is too large to decode, or None when it is not an image."""
        try:
            if path.stat().st_size > MAX_IMAGE_BYTES:
                return "too many bytes"
            data = path.read_bytes()
            reason = too_large(data, self.max_pixels)
            if reason:
                return reason
            return self._decode(data).numpy()
        except self._errors:
            return None


@functools.lru_cache(maxsize=8)
def image_decoder(size: tuple[int, int], channels: int):
    """The traced ``bytes -> (H, W, channels) uint8`` function, one trace per size and channels."""
    import tensorflow as tf

    return tf.function(decode_image_fn(size, channels), autograph=False,
                       input_signature=[tf.TensorSpec([], tf.string)])


def decode_image(data: bytes, size: tuple[int, int], channels: int,
                 max_pixels: int = MAX_IMAGE_PIXELS) -> np.ndarray:
    """One encoded image as training saw its images: decoded, channels converted, resized.

    Raises ValueError when ``data`` is not a PNG, JPEG, BMP or GIF image, or is too large to
    decode safely (a decompression bomb)."""
    import tensorflow as tf

    reason = too_large(data, max_pixels)
    if reason:
        raise ValueError(f"too large to decode safely: {reason}")
    try:
        return image_decoder(tuple(size), channels)(data).numpy()
    except tf.errors.OpError:
        raise ValueError("not a PNG, JPEG, BMP or GIF image") from None


def decode_image_fn(size: tuple[int, int], channels: int):
    """bytes -> (H, W, channels) uint8 in TensorFlow ops (for ``tf.function`` and ``Dataset.map``):
    decode any supported format (first frame of a GIF), drop alpha, convert grey <-> RGB, resize
    with antialiasing (a no-op at the same size)."""
    import tensorflow as tf

    def with_channels(image, c):
        return tf.ensure_shape(image, [None, None, c])

    def decode(data):
        image = tf.io.decode_image(data, channels=0, expand_animations=False)  # 16-bit PNGs scale to uint8
        have = tf.shape(image)[2]
        image = tf.cond(have % 2 == 0, lambda: image[..., : have - 1], lambda: image)  # grey+alpha, RGBA
        if channels == 3:
            image = tf.cond(tf.shape(image)[2] == 1, lambda: tf.image.grayscale_to_rgb(with_channels(image, 1)),
                            lambda: with_channels(image, 3))
        else:
            image = tf.cond(tf.shape(image)[2] == 3, lambda: tf.image.rgb_to_grayscale(with_channels(image, 3)),
                            lambda: with_channels(image, 1))
        resized = tf.image.resize(image, size, method="bilinear", antialias=True)
        return tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)

    return decode
