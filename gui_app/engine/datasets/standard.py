"""``mnist``, ``fashion_mnist``, ``cifar10`` and ``cifar100``: the user's own copy when
``dataset.path`` is set, else the Keras cache, downloading on first use.

``keras.datasets.*.load_data()`` takes no path, prints to stdout and reports no progress,
so these go through our readers (arrays.py, cifar.py) and downloader (downloads.py).
"""
from __future__ import annotations

from pathlib import Path

from gui_app.core.config import DatasetConfig
from gui_app.engine.datasets import downloads
from gui_app.engine.datasets.arrays import IDX_FILES, load_idx_folder, load_npz
from gui_app.engine.datasets.base import Dataset, DatasetError, ProgressCallback, require_path
from gui_app.engine.datasets.cifar import CIFAR10, CIFAR100, CifarLayout, load_cifar

DIGIT_NAMES = [str(i) for i in range(10)]
# https://github.com/zalandoresearch/fashion-mnist#labels
FASHION_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                 "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def load_mnist_like(cfg: DatasetConfig, progress: ProgressCallback | None = None) -> Dataset:
    """MNIST or Fashion-MNIST: an .npz in the Keras layout, or a folder of the four IDX files."""
    names = FASHION_NAMES if cfg.name == "fashion_mnist" else DIGIT_NAMES
    if cfg.path:
        return _read_mnist_like(require_path(cfg.path, f"dataset {cfg.name!r}"), cfg.name, names)
    if cfg.name == "mnist":
        path = downloads.fetch(downloads.MNIST_NPZ, progress,
                               hint="to work offline, set dataset.path to a copy of mnist.npz")
    else:
        hint = "to work offline, set dataset.path to a folder with the four Fashion-MNIST IDX files"
        path = [downloads.fetch(remote, progress, hint=hint) for remote in downloads.FASHION_MNIST][0].parent
    return _read_mnist_like(path, cfg.name, names)


def _read_mnist_like(path: Path, name: str, class_names: list[str]) -> Dataset:
    if path.is_dir():
        if not any(path.glob("train-images*")) and (path / "mnist.npz").is_file():
            return load_npz(path / "mnist.npz", name, class_names)
        return load_idx_folder(path, name, class_names)
    if path.suffix == ".npz":
        return load_npz(path, name, class_names)
    raise DatasetError(f"{path}: expected an .npz file (x_train, y_train, x_test, y_test) or a folder "
                       f"with {', '.join(IDX_FILES.values())}")


def load_cifar_named(cfg: DatasetConfig, progress: ProgressCallback | None = None) -> Dataset:
    layout, remote = (CIFAR10, downloads.CIFAR10_TAR) if cfg.name == "cifar10" else (CIFAR100, downloads.CIFAR100_TAR)
    if cfg.path:
        return load_cifar(cfg.path, layout, progress)
    return load_cifar(_cached_cifar(layout, remote, progress), layout, progress)


def _cached_cifar(layout: CifarLayout, remote: downloads.Remote, progress: ProgressCallback | None) -> Path:
    """Keras extracts its verified archive to ``<name>-target/<folder>``; reading that is the
    fastest. Otherwise the archive itself (ours or Keras's), downloaded if needed."""
    cache = downloads.keras_cache_dir()
    extracted = cache / remote.cache_name.removesuffix("_archive") / layout.folder
    if (extracted / layout.meta).is_file() and all((extracted / f).is_file() for f in layout.files):
        return extracted
    hint = f"to work offline, set dataset.path to the {layout.folder} folder or its .tar.gz"
    return downloads.fetch(remote, progress, hint=hint)
