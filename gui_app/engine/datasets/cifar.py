"""CIFAR-10 and CIFAR-100 from their "python version" files
(https://www.cs.toronto.edu/~kriz/cifar.html): the extracted folder or the .tar.gz itself.

The batches are Python 2 pickles of ``{b"data": uint8 (N, 3072), b"labels": [...]}``. They are
read with an unpickler that only rebuilds numpy arrays (as keras.datasets does), so a tampered
file cannot run code. A tarball is read as a stream in one pass, never extracted to disk.
"""
from __future__ import annotations

import io
import pickle
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from gui_app.engine.datasets.base import Dataset, DatasetError, ProgressCallback, Throttle, make_dataset, require_path


@dataclass(frozen=True)
class CifarLayout:
    name: str
    folder: str  # the folder the archive unpacks to
    train: tuple[str, ...]
    test: str
    meta: str
    label_key: str
    names_key: str

    @property
    def files(self) -> tuple[str, ...]:
        return (*self.train, self.test, self.meta)


CIFAR10 = CifarLayout("cifar10", "cifar-10-batches-py", tuple(f"data_batch_{i}" for i in range(1, 6)),
                      "test_batch", "batches.meta", "labels", "label_names")
CIFAR100 = CifarLayout("cifar100", "cifar-100-python", ("train",), "test", "meta",
                       "fine_labels", "fine_label_names")

# numpy spells these numpy.core.* before 2.0 and numpy._core.* after; real CIFAR files use the
# former, pickles written today the latter. Python 3 writes bytes at protocol 2 as
# _codecs.encode(str, "latin1"), which only ever returns bytes.
_ALLOWED = frozenset({("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")} | {
    (f"numpy.{core}.{module}", name) for core in ("core", "_core")
    for module, name in (("multiarray", "_reconstruct"), ("multiarray", "scalar"), ("numeric", "_frombuffer"))})


# The largest real member is CIFAR-100's train (about 155 MB); anything far beyond is not CIFAR
# and must not be read into memory whole.
MAX_MEMBER_BYTES = 256 << 20


def _too_big(where: str, size: int) -> DatasetError:
    return DatasetError(f"{where}: {size:,} bytes is too large for a CIFAR batch (limit {MAX_MEMBER_BYTES:,})")


class _ArraysOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def load_cifar(path: str | Path, layout: CifarLayout, progress: ProgressCallback | None = None) -> Dataset:
    """``path``: the ``cifar-10-batches-py`` / ``cifar-100-python`` folder, a folder holding it,
    or the ``.tar.gz`` (also Keras's cache copy, which has no extension)."""
    path = require_path(path, f"dataset {layout.name!r}")
    # name -> (how errors name the file, its bytes)
    blobs = _read_folder(path, layout) if path.is_dir() else _read_tarball(path, layout, progress)
    meta = _unpickle(*blobs[layout.meta])
    names = meta.get(layout.names_key)
    if not isinstance(names, list) or not names:
        raise DatasetError(f"{blobs[layout.meta][0]}: has no {layout.names_key} list")
    class_names = [n.decode("utf-8", "replace") if isinstance(n, bytes) else str(n) for n in names]
    k = len(class_names)
    train = [_batch(*blobs[name], layout.label_key, k) for name in layout.train]
    x_test, y_test = _batch(*blobs[layout.test], layout.label_key, k)
    return make_dataset(layout.name, str(path), np.concatenate([x for x, _ in train]),
                        np.concatenate([y for _, y in train]), x_test, y_test, class_names=class_names)


def _read_folder(path: Path, layout: CifarLayout) -> dict[str, tuple[str, bytes]]:
    folder = path if (path / layout.meta).is_file() else path / layout.folder
    if not (folder / layout.meta).is_file():
        raise DatasetError(f"{path}: no {layout.meta} here or in {layout.folder}/; expected the extracted "
                           f"{layout.folder} folder of the CIFAR python version")
    blobs = {}
    for name in layout.files:
        if not (folder / name).is_file():
            raise DatasetError(f"{folder}: missing {name}")
        size = (folder / name).stat().st_size
        if size > MAX_MEMBER_BYTES:
            raise _too_big(str(folder / name), size)
        blobs[name] = (str(folder / name), (folder / name).read_bytes())
    return blobs


def _read_tarball(path: Path, layout: CifarLayout, progress: ProgressCallback | None) -> dict[str, tuple[str, bytes]]:
    report = Throttle(progress)
    blobs: dict[str, tuple[str, bytes]] = {}
    try:
        with tarfile.open(path, mode="r|*") as tar:  # a stream: one pass, no seeking back
            for member in tar:
                parts = PurePosixPath(member.name).parts
                if member.isfile() and len(parts) == 2 and parts[0] == layout.folder and parts[1] in layout.files:
                    if member.size > MAX_MEMBER_BYTES:
                        raise _too_big(f"{path}: {member.name}", member.size)
                    data = tar.extractfile(member)
                    assert data is not None  # None only for what is not a regular file
                    blob = data.read(MAX_MEMBER_BYTES + 1)
                    if len(blob) > MAX_MEMBER_BYTES:
                        raise _too_big(f"{path}: {member.name}", len(blob))
                    blobs[parts[1]] = (f"{path}: {member.name}", blob)
                    report("read", path.name, len(blobs), len(layout.files))
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{path}: not a readable CIFAR .tar.gz or truncated ({exc})") from None
    missing = [name for name in layout.files if name not in blobs]
    if missing:
        raise DatasetError(f"{path}: the archive has no {layout.folder}/{missing[0]}; "
                           f"is it the {layout.name} python version?")
    return blobs


def _unpickle(where: str, blob: bytes) -> dict[str, Any]:
    try:
        obj = _ArraysOnlyUnpickler(io.BytesIO(blob), encoding="bytes").load()
    except Exception as exc:  # noqa: BLE001 - unpickling raises almost anything on a damaged file
        raise DatasetError(f"{where}: not a CIFAR python batch or truncated ({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: not a CIFAR python batch (holds a {type(obj).__name__}, not a dict)")
    return {k.decode("latin1") if isinstance(k, bytes) else str(k): v for k, v in obj.items()}


def _batch(where: str, blob: bytes, label_key: str, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    batch = _unpickle(where, blob)
    if "data" not in batch or label_key not in batch:
        raise DatasetError(f"{where}: a CIFAR batch needs 'data' and '{label_key}'; found {', '.join(sorted(batch))}")
    data, labels = np.asarray(batch["data"]), np.asarray(batch[label_key])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DatasetError(f"{where}: data must be uint8 rows of 3072 values; got {data.dtype} {data.shape}")
    if labels.shape != (len(data),):
        raise DatasetError(f"{where}: {len(data)} images but {labels.size} labels")
    if labels.dtype.kind not in "iu" or (labels.size and not 0 <= labels.min() <= labels.max() < num_classes):
        raise DatasetError(f"{where}: labels must be class indices 0..{num_classes - 1}")
    # Rows are the red, green and blue 32x32 planes one after the other: NCHW -> NHWC.
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels
