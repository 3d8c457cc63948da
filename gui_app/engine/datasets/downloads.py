"""A small downloader for the datasets Keras hosts, sharing Keras's cache.

We do not call ``keras.utils.get_file``: it prints progress bars to stdout (our event
channel) and reports nothing we can forward. Files land where Keras puts them
(``$KERAS_HOME/datasets`` or ``~/.keras/datasets``) under the same names, so a file either
tool downloaded serves both, and they carry the SHA-256 that ``keras.datasets`` checks.
A download streams into a temporary file beside its destination and is renamed into place
only when complete and verified, so an interrupted download never looks like a cached file.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from gui_app.core.atomic_io import atomic_path
from gui_app.engine.datasets.base import DatasetError, ProgressCallback, Throttle

CHUNK = 1 << 20
TIMEOUT = 30  # seconds without data before a download is given up

_KERAS_BASE = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"


@dataclass(frozen=True)
class Remote:
    url: str
    cache_name: str  # path under the cache's datasets/ folder, as keras.datasets names it
    sha256: str | None  # None where keras.datasets checks nothing (Fashion-MNIST)


# keras 3.15 keras/src/datasets/{mnist,fashion_mnist,cifar10,cifar100}.py
MNIST_NPZ = Remote(_KERAS_BASE + "mnist.npz", "mnist.npz",
                   "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1")
FASHION_MNIST = tuple(
    Remote(_KERAS_BASE + name, f"fashion-mnist/{name}", None)
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                 "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"))
CIFAR10_TAR = Remote("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
                     "cifar-10-batches-py-target_archive",
                     "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce")
CIFAR100_TAR = Remote("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
                      "cifar-100-python-target_archive",
                      "85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7")


def keras_cache_dir() -> Path:
    """The ``datasets`` folder of the Keras cache, resolved the way Keras resolves it."""
    home = os.environ.get("KERAS_HOME")
    if home:
        base = Path(home).expanduser()
    else:
        user = Path.home()
        base = (user if os.access(user, os.W_OK) else Path("/tmp")) / ".keras"
    return base / "datasets"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(remote: Remote, progress: ProgressCallback | None = None, hint: str = "",
          cache_dir: Path | None = None) -> Path:
    """The cached copy of ``remote``, downloaded first if missing or if its hash is wrong."""
    dest = (cache_dir or keras_cache_dir()) / remote.cache_name
    if dest.is_file() and (remote.sha256 is None or sha256_of(dest) == remote.sha256):
        return dest
    download(remote.url, dest, remote.sha256, progress, hint)
    return dest


def download(url: str, dest: Path, sha256: str | None = None, progress: ProgressCallback | None = None,
             hint: str = "") -> None:
    """Stream ``url`` to ``dest``, verifying ``sha256``; reports ``stage: download`` progress.

    ``hint`` ends the error message of a failed download (what to do without a network).
    """
    hint = hint or "set dataset.path to files you already have"
    report = Throttle(progress)
    what = url.rsplit("/", 1)[-1] or dest.name
    import urllib.error
    import urllib.request  # (with http.client, ~40 ms: only when something is downloaded)

    digest = hashlib.sha256()
    with atomic_path(dest) as tmp:  # renamed into place (fsynced) only once complete and verified
        try:  # the cache folder is checked before the network
            dest.parent.mkdir(parents=True, exist_ok=True)
            out = open(tmp, "xb")
        except OSError as exc:
            raise DatasetError(f"{dest.parent}: cannot write the download cache ({exc.strerror or exc})") from None
        with out:
            try:
                with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
                    length = response.headers.get("Content-Length")
                    total = int(length) if length and length.isdigit() else None
                    received = 0
                    report("download", what, 0, total)
                    while chunk := response.read(CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        received += len(chunk)
                        report("download", what, received, total)
            except urllib.error.HTTPError as exc:
                raise DatasetError(f"cannot download {url}: HTTP {exc.code} {exc.reason}; {hint}") from None
            except urllib.error.URLError as exc:
                raise DatasetError(f"cannot download {url}: {exc.reason}; {hint}") from None
            except (OSError, ValueError) as exc:  # timeouts, resets, a full disk
                raise DatasetError(f"cannot download {url}: {exc}; {hint}") from None
        if total is not None and received != total:
            raise DatasetError(f"cannot download {url}: got {received} of {total} bytes; {hint}")
        if total is None:
            report("download", what, received, received)
        if sha256 is not None and digest.hexdigest() != sha256:
            raise DatasetError(f"{url}: the downloaded file has SHA-256 {digest.hexdigest()}, expected "
                               f"{sha256}; the download was corrupted or the file changed")
