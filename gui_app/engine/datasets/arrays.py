"""Datasets stored as arrays: ``.npz`` files (the Keras mnist.npz layout) and MNIST-layout
IDX files (http://yann.lecun.com/exdb/mnist/, the format of MNIST and Fashion-MNIST).

Both are read without pickle: a dataset file from the internet must not be able to run code.
"""
from __future__ import annotations

import gzip
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Sequence

import numpy as np

from gui_app.engine.datasets.base import Dataset, DatasetError, make_dataset, require_path

NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")

# IDX type codes (third byte of the magic number); values are stored big-endian.
IDX_DTYPES: dict[int, np.dtype] = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
              0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}

# The four files of an IDX dataset. Some copies of MNIST (Kaggle's, for one) spell them with a
# dot ("train-images.idx3-ubyte"), so both spellings are accepted.
IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def load_npz(path: str | Path | None, name: str = "npz", class_names: Sequence[str] | None = None) -> Dataset:
    path = require_path(path, f"dataset {name!r}")
    if path.is_dir():
        raise DatasetError(f"{path}: is a folder; expected an .npz file with {', '.join(NPZ_KEYS)}")
    arrays = read_npz(path)
    missing = [k for k in NPZ_KEYS if k not in arrays]
    if missing:
        raise DatasetError(f"{path}: missing array(s) {', '.join(missing)} "
                           f"(found: {', '.join(sorted(arrays)) or 'none'})")
    names = class_names
    if names is None and "class_names" in arrays:
        stored = arrays["class_names"]
        if stored.ndim != 1 or stored.dtype.kind not in "USiu":
            raise DatasetError(f"{path}: class_names must be a 1-D array of strings; got {stored.dtype} {stored.shape}")
        names = [str(n) for n in stored.tolist()]
    return _dataset(name, str(path), arrays, names)


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an .npz file, read now (a truncated member fails here, not later)."""
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic == b"\x93NUMPY":
        raise DatasetError(f"{path}: is a single .npy array, not an .npz archive of {', '.join(NPZ_KEYS)}")
    if not magic.startswith(b"PK"):
        raise DatasetError(f"{path}: not an .npz file (no zip signature at its start)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise DatasetError(f"{path}: holds Python objects (pickled arrays); save plain numeric "
                               f"or string arrays") from None
        raise DatasetError(f"{path}: not a valid .npz file or truncated ({exc})") from None
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise DatasetError(f"{path}: not a valid .npz file or truncated ({exc})") from None


def load_idx_folder(path: str | Path | None, name: str = "idx", class_names: Sequence[str] | None = None) -> Dataset:
    folder = require_path(path, f"dataset {name!r}")
    if not folder.is_dir():
        raise DatasetError(f"{folder}: expected a folder holding {', '.join(IDX_FILES.values())} (each may be .gz)")
    arrays = {key: read_idx(find_idx_file(folder, stem)) for key, stem in IDX_FILES.items()}
    for key in ("x_train", "x_test"):
        if arrays[key].ndim != 3:
            raise DatasetError(f"{find_idx_file(folder, IDX_FILES[key])}: images must be a 3-D IDX array "
                               f"(count, rows, columns); got shape {arrays[key].shape}")
    for key in ("y_train", "y_test"):
        if arrays[key].ndim != 1:
            raise DatasetError(f"{find_idx_file(folder, IDX_FILES[key])}: labels must be a 1-D IDX array; "
                               f"got shape {arrays[key].shape}")
    for part in ("train", "test"):
        n_x, n_y = len(arrays[f"x_{part}"]), len(arrays[f"y_{part}"])
        if n_x != n_y:
            raise DatasetError(f"{folder}: {find_idx_file(folder, IDX_FILES['x_' + part]).name} holds {n_x} "
                               f"images but {find_idx_file(folder, IDX_FILES['y_' + part]).name} holds {n_y} labels")
    return _dataset(name, str(folder), arrays, class_names)


def _dataset(name: str, source: str, arrays: dict[str, np.ndarray], class_names: Sequence[str] | None) -> Dataset:
    return make_dataset(name, source, arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"],
                        class_names)


def find_idx_file(folder: Path, stem: str) -> Path:
    dotted = stem.replace("-idx", ".idx")
    for candidate in (stem, stem + ".gz", dotted, dotted + ".gz"):
        if (folder / candidate).is_file():
            return folder / candidate
    raise DatasetError(f"{folder}: missing {stem} (or {stem}.gz)")


def read_idx(path: Path) -> np.ndarray:
    """One IDX file, gzip-compressed or not (decided by its content, not its name)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{path}: cannot decompress ({exc}); the file is damaged or truncated") from None
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] not in IDX_DTYPES or not 1 <= data[3] <= 4:
        raise DatasetError(f"{path}: not an IDX file (bad magic number {data[:4].hex() or 'none'})")
    dtype, ndim = IDX_DTYPES[data[2]], data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DatasetError(f"{path}: truncated IDX header")
    dims = struct.unpack(f">{ndim}I", data[4:header])
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    body = len(data) - header
    if body < expected:
        raise DatasetError(f"{path}: truncated: the header says {'x'.join(map(str, dims))} values "
                           f"({expected} bytes) but only {body} bytes follow")
    if body > expected:
        raise DatasetError(f"{path}: {body - expected} bytes follow the {'x'.join(map(str, dims))} values "
                           f"the header declares; not a well-formed IDX file")
    return np.frombuffer(data, dtype, offset=header).reshape(dims).astype(dtype.newbyteorder("="))
