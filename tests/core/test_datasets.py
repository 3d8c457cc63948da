"""Datasets: every format read from files the tests write, and every bad input's one-line error."""
from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np
import pytest

from gui_app.core.config import DatasetConfig
from gui_app.engine.datasets import Dataset, DatasetError, downloads, load_dataset
from gui_app.engine.datasets.base import stratified_split
from gui_app.engine.datasets.standard import FASHION_NAMES


@pytest.fixture(autouse=True)
def keras_home(tmp_path, monkeypatch):
    """No test may touch (or download into) the real ~/.keras."""
    home = tmp_path / "keras_home"
    monkeypatch.setenv("KERAS_HOME", str(home))
    return home


def load(name: str, path=None, **kw) -> Dataset:
    return load_dataset(DatasetConfig(name=name, path=str(path) if path else None, **kw))


def raises(match_path, *fragments, **cfg):
    """Load and expect a one-line DatasetError naming ``match_path`` and every fragment."""
    with pytest.raises(DatasetError) as info:
        load(**cfg)
    message = str(info.value)
    assert "\n" not in message
    assert str(match_path) in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


# ---- writers ---------------------------------------------------------------------------------

def write_idx(path: Path, array: np.ndarray, code: int = 0x08, gz: bool = False) -> Path:
    data = struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    data += array.astype(array.dtype.newbyteorder(">")).tobytes()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def mnist_arrays(n_train=12, n_test=6, k=10, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8), np.arange(n_train, dtype=np.uint8) % k,
            rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8), np.arange(n_test, dtype=np.uint8) % k)


def write_idx_folder(folder: Path, gz: bool = False, arrays=None) -> tuple:
    folder.mkdir(parents=True, exist_ok=True)
    arrays = arrays or mnist_arrays()
    suffix = ".gz" if gz else ""
    for name, a in zip(("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"), arrays):
        write_idx(folder / (name + suffix), a, gz=gz)
    return arrays


def write_npz(path: Path, **arrays) -> Path:
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def cifar_batch(n: int, labels, label_key=b"labels", seed=0) -> bytes:
    data = np.random.default_rng(seed).integers(0, 256, (n, 3072), dtype=np.uint8)
    # Protocol 2 like the real (Python 2) files.
    return pickle.dumps({b"batch_label": b"synthetic", label_key: list(labels), b"data": data}, protocol=2)


def write_cifar10(folder: Path, per_batch=4, n_test=5) -> Path:
    folder.mkdir(parents=True)
    for i in range(1, 6):
        labels = [(i + j) % 10 for j in range(per_batch)]
        (folder / f"data_batch_{i}").write_bytes(cifar_batch(per_batch, labels, seed=i))
    (folder / "test_batch").write_bytes(cifar_batch(n_test, range(n_test), seed=9))
    names = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]
    (folder / "batches.meta").write_bytes(pickle.dumps({b"label_names": names, b"num_vis": 3072}, protocol=2))
    return folder


def tar_folder(folder: Path, tar_path: Path) -> Path:
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return tar_path


def write_bmp(path: Path, rgb: np.ndarray) -> None:
    """A 24-bit uncompressed BMP (TensorFlow reads BMP but writes none)."""
    h, w, _ = rgb.shape
    row = (w * 3 + 3) // 4 * 4
    pixels = b"".join(rgb[y, :, ::-1].tobytes().ljust(row, b"\0") for y in range(h - 1, -1, -1))
    header = struct.pack("<2sIHHI", b"BM", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    path.write_bytes(header + info + pixels)


# A 1x1 GIF89a whose one pixel is transparent.
TINY_GIF = bytes.fromhex("47494638396101000100800000ffffff00000021f90401000000002c00000000010001000002024401003b")


def encode_png(rgb: np.ndarray) -> bytes:
    import tensorflow as tf

    return tf.io.encode_png(rgb).numpy()


def solid(h, w, colour=(200, 100, 50)) -> np.ndarray:
    return np.broadcast_to(np.array(colour, np.uint8), (h, w, 3)).copy()


# ---- digits ----------------------------------------------------------------------------------

def test_digits_is_a_fixed_stratified_split_of_1797_images():
    a, b = load("digits"), load("digits")
    assert a.x_train.shape == (1438, 8, 8, 1) and a.x_test.shape == (359, 8, 8, 1)
    assert a.x_train.dtype == np.uint8 and a.y_train.dtype == np.int64
    assert a.x_train.max() == 255 and a.x_train.min() == 0
    assert a.class_names == [str(i) for i in range(10)] and a.num_classes == 10 and a.input_shape == (8, 8, 1)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    totals = np.bincount(a.y_train, minlength=10) + np.bincount(a.y_test, minlength=10)
    assert totals.tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    assert np.all(np.abs(np.bincount(a.y_test) - 0.2 * totals) <= 0.5)  # stratified
    summary = a.summary()
    assert summary == {"name": "digits", "class_names": a.class_names, "input_shape": [8, 8, 1],
                       "train_examples": 1438, "test_examples": 359, "class_counts": summary["class_counts"]}
    assert sum(summary["class_counts"]) == 1438 and summary["class_counts"][0] == 142
    assert a.warnings == []


def test_stratified_split_is_a_partition_and_keeps_singletons_in_train():
    y = np.array([0] * 10 + [1] * 3 + [2])
    train, test = stratified_split(y, 0.2)
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(len(y)))
    assert np.bincount(y[test], minlength=3).tolist() == [2, 1, 0]
    np.testing.assert_array_equal(test, stratified_split(y, 0.2)[1])


# ---- npz -------------------------------------------------------------------------------------

def test_npz_grey_uint8_and_keras_layout(tmp_path):
    xtr, ytr, xte, yte = mnist_arrays(k=7)
    ds = load("npz", write_npz(tmp_path / "d.npz", x_train=xtr, y_train=ytr, x_test=xte, y_test=yte))
    assert ds.x_train.shape == (12, 28, 28, 1) and ds.x_test.shape == (6, 28, 28, 1)
    np.testing.assert_array_equal(ds.x_train[..., 0], xtr)
    assert ds.y_train.dtype == np.int64 and ds.y_train.tolist() == (np.arange(12) % 7).tolist()
    assert ds.class_names == [str(i) for i in range(7)]


def test_npz_floats_channels_labels_column_and_class_names(tmp_path):
    unit = np.linspace(0, 1, 4 * 5 * 6 * 3, dtype=np.float32).reshape(4, 5, 6, 3)
    path = write_npz(tmp_path / "f.npz", x_train=unit, y_train=np.array([[0], [1], [2], [1]]),
                     x_test=unit[:2] * 255.0, y_test=np.array([2.0, 0.0]), class_names=np.array(["a", "b", "c"]))
    ds = load("npz", path)
    assert ds.x_train.shape == (4, 5, 6, 3) and ds.x_train.dtype == np.uint8
    assert ds.x_train.max() == 255 and ds.x_train[0, 0, 0, 0] == 0
    np.testing.assert_array_equal(ds.x_test, ds.x_train[:2])  # [0,1]*255 and [0,255] agree
    assert ds.y_train.tolist() == [0, 1, 2, 1] and ds.y_test.tolist() == [2, 0]
    assert ds.class_names == ["a", "b", "c"] and ds.summary()["class_counts"] == [1, 2, 1]


def test_npz_bad_inputs_name_the_file(tmp_path):
    xtr, ytr, xte, yte = mnist_arrays()
    good = dict(x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
    raises(tmp_path / "nope.npz", "no such file", name="npz", path=tmp_path / "nope.npz")
    text = tmp_path / "text.npz"
    text.write_text("x_train,y_train\n1,2\n")
    raises(text, "not an .npz", name="npz", path=text)
    whole = write_npz(tmp_path / "whole.npz", **good).read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(whole[: len(whole) // 2])
    raises(cut, "truncated", name="npz", path=cut)
    cases = {
        "missing": (dict(good, y_test=None), "missing array(s) y_test"),
        "lengths": (dict(good, y_train=ytr[:-1]), "x_train has 12 images but y_train has 11 labels"),
        "negative": (dict(good, y_test=yte.astype(np.int64) - 1), "labels must be >= 0"),
        "rank": (dict(good, x_train=xtr.reshape(12, -1)), "must have shape (N, H, W) or (N, H, W, C)"),
        "range": (dict(good, x_train=xtr * 300.0), "must be in [0, 1] or [0, 255]"),
        "shapes": (dict(good, x_test=xte[:, :20]), "train images are (28, 28, 1) but test images are (20, 28, 1)"),
        "names": (dict(good, class_names=np.array(["a", "b"])), "y_train has label 9, out of range for 2 classes"),
        "empty": (dict(good, x_test=xte[:0], y_test=yte[:0]), "holds no images"),
    }
    for stem, (arrays, fragment) in cases.items():
        path = write_npz(tmp_path / f"{stem}.npz", **{k: v for k, v in arrays.items() if v is not None})
        raises(path, fragment, name="npz", path=path)


# ---- IDX, MNIST, Fashion-MNIST ---------------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True])
def test_idx_folder(tmp_path, gz):
    xtr, ytr, xte, yte = write_idx_folder(tmp_path / "idx", gz=gz)
    ds = load("idx", tmp_path / "idx")
    assert ds.x_train.shape == (12, 28, 28, 1) and ds.x_test.shape == (6, 28, 28, 1)
    np.testing.assert_array_equal(ds.x_test[..., 0], xte)
    assert ds.y_train.tolist() == ytr.tolist() and ds.num_classes == 10


def test_idx_other_dtypes_and_dotted_names(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    x = np.linspace(0, 1, 3 * 4 * 4).reshape(3, 4, 4)
    write_idx(folder / "train-images.idx3-ubyte", x.astype(np.float32), code=0x0D)
    write_idx(folder / "train-labels.idx1-ubyte", np.array([0, 1, 300], np.int32), code=0x0C)
    write_idx(folder / "t10k-images-idx3-ubyte", (x * 255).astype(np.int16), code=0x0B, gz=True)
    write_idx(folder / "t10k-labels-idx1-ubyte", np.array([1, 1, 0], np.uint8))
    ds = load("idx", folder)
    assert ds.x_train.shape == (3, 4, 4, 1) and ds.x_train.max() == 255
    assert ds.y_train.tolist() == [0, 1, 300] and ds.num_classes == 301


def test_idx_bad_inputs_name_the_file(tmp_path):
    def folder(name):
        write_idx_folder(tmp_path / name)
        return tmp_path / name

    f = folder("magic")
    (f / "train-labels-idx1-ubyte").write_bytes(b"\x00\x00\x99\x01" + b"\x00" * 8)
    raises(f / "train-labels-idx1-ubyte", "not an IDX file", name="idx", path=f)
    f = folder("short")
    data = (f / "t10k-images-idx3-ubyte").read_bytes()
    (f / "t10k-images-idx3-ubyte").write_bytes(data[:-100])
    raises(f / "t10k-images-idx3-ubyte", "truncated", "6x28x28", name="idx", path=f)
    f = folder("gz")
    (f / "train-images-idx3-ubyte").unlink()
    packed = gzip.compress(os.urandom(5000))
    (f / "train-images-idx3-ubyte.gz").write_bytes(packed[: len(packed) // 2])
    raises(f / "train-images-idx3-ubyte.gz", "cannot decompress", name="idx", path=f)
    f = folder("missing")
    (f / "t10k-labels-idx1-ubyte").unlink()
    raises(f, "missing t10k-labels-idx1-ubyte", name="idx", path=f)
    f = folder("count")
    write_idx(f / "train-labels-idx1-ubyte", np.zeros(11, np.uint8))
    raises(f, "train-images-idx3-ubyte holds 12 images but train-labels-idx1-ubyte holds 11 labels",
           name="idx", path=f)
    f = folder("rank")
    write_idx(f / "train-images-idx3-ubyte", np.zeros((12, 784), np.uint8))
    raises(f / "train-images-idx3-ubyte", "must be a 3-D IDX array", name="idx", path=f)
    (tmp_path / "empty").mkdir()
    raises(tmp_path / "empty", "missing train-images-idx3-ubyte", name="idx", path=tmp_path / "empty")


def test_mnist_and_fashion_mnist_from_the_users_files(tmp_path):
    xtr, ytr, xte, yte = mnist_arrays()
    npz = write_npz(tmp_path / "mnist.npz", x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
    ds = load("mnist", npz)
    assert ds.name == "mnist" and ds.class_names == [str(i) for i in range(10)] and len(ds.y_train) == 12
    write_idx_folder(tmp_path / "fashion", gz=True)
    ds = load("fashion_mnist", tmp_path / "fashion")
    assert ds.class_names == FASHION_NAMES and ds.class_names[0] == "T-shirt/top" and ds.x_test.shape == (6, 28, 28, 1)
    bad = write_npz(tmp_path / "bad.npz", x_train=xtr, y_train=ytr + 1, x_test=xte, y_test=yte)
    raises(bad, "y_train has label 10, out of range for 10 classes", name="mnist", path=bad)


# ---- CIFAR -----------------------------------------------------------------------------------

def test_cifar10_folder_and_tarball_agree(tmp_path):
    folder = write_cifar10(tmp_path / "cifar-10-batches-py")
    ds = load("cifar10", folder)
    assert ds.x_train.shape == (20, 32, 32, 3) and ds.x_test.shape == (5, 32, 32, 3)
    assert ds.class_names[:3] == ["airplane", "automobile", "bird"] and ds.num_classes == 10
    raw = pickle.loads((folder / "data_batch_1").read_bytes(), encoding="bytes")[b"data"]
    # Row layout: 1024 red, 1024 green, 1024 blue values, each 32x32 row-major.
    assert ds.x_train[0, 2, 5].tolist() == [raw[0, 2 * 32 + 5], raw[0, 1024 + 69], raw[0, 2048 + 69]]
    assert ds.y_train[:4].tolist() == [1, 2, 3, 4]
    tarball = tar_folder(folder, tmp_path / "cifar-10-python.tar.gz")
    events = []
    from_tar = load_dataset(DatasetConfig(name="cifar10", path=str(tarball)), events.append)
    np.testing.assert_array_equal(from_tar.x_train, ds.x_train)
    np.testing.assert_array_equal(from_tar.y_test, ds.y_test)
    assert events[-1] == {"stage": "read", "what": tarball.name, "done": 7, "total": 7}
    assert load("cifar10", tmp_path).y_train.tolist() == ds.y_train.tolist()  # the parent folder
    (folder / "test_batch").write_bytes(b"not a pickle")
    raises(folder / "test_batch", "not a CIFAR python batch", name="cifar10", path=tmp_path)


def test_cifar100_fine_labels_from_tarball(tmp_path):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    (folder / "train").write_bytes(cifar_batch(6, [0, 99, 5, 5, 7, 1], b"fine_labels"))
    (folder / "test").write_bytes(cifar_batch(2, [99, 3], b"fine_labels"))
    names = [f"class{i}".encode() for i in range(100)]
    (folder / "meta").write_bytes(pickle.dumps({b"fine_label_names": names, b"coarse_label_names": names[:20]}))
    ds = load("cifar100", tar_folder(folder, tmp_path / "c100.tar.gz"))
    assert ds.num_classes == 100 and ds.class_names[99] == "class99"
    assert ds.y_train.tolist() == [0, 99, 5, 5, 7, 1] and ds.x_test.shape == (2, 32, 32, 3)


def test_cifar_bad_inputs_name_the_file(tmp_path):
    folder = write_cifar10(tmp_path / "cifar-10-batches-py")
    whole = tar_folder(folder, tmp_path / "whole.tar.gz").read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    raises(cut, "truncated", name="cifar10", path=cut)
    raises(tmp_path / "whole.tar.gz", "has no cifar-100-python/train", name="cifar100", path=tmp_path / "whole.tar.gz")
    (folder / "data_batch_3").unlink()
    raises(folder, "missing data_batch_3", name="cifar10", path=folder)

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    (folder / "data_batch_3").write_bytes(pickle.dumps({b"data": Evil()}, protocol=2))
    raises(folder / "data_batch_3", "refusing to load", name="cifar10", path=folder)
    (folder / "data_batch_3").write_bytes(cifar_batch(4, [0, 1, 2, 10]))
    raises(folder / "data_batch_3", "labels must be class indices 0..9", name="cifar10", path=folder)
    (folder / "data_batch_3").write_bytes(cifar_batch(4, [0, 1, 2, 3])[:500])
    raises(folder / "data_batch_3", "truncated", name="cifar10", path=folder)
    (tmp_path / "empty").mkdir()
    raises(tmp_path / "empty", "no batches.meta", name="cifar10", path=tmp_path / "empty")


def test_cifar_without_path_reads_the_keras_extracted_cache(keras_home):
    write_cifar10(keras_home / "datasets" / "cifar-10-batches-py-target" / "cifar-10-batches-py")
    ds = load("cifar10")
    assert ds.x_train.shape == (20, 32, 32, 3) and ds.class_names[-1] == "truck"


# ---- downloads -------------------------------------------------------------------------------

def test_download_streams_verifies_and_caches(tmp_path, keras_home, capsys):
    source = tmp_path / "source.bin"
    source.write_bytes(os.urandom(3 * downloads.CHUNK + 123))
    remote = downloads.Remote(source.as_uri(), "sub/file.bin", hashlib.sha256(source.read_bytes()).hexdigest())
    events = []
    path = downloads.fetch(remote, events.append)
    assert path == keras_home / "datasets" / "sub" / "file.bin"
    assert path.read_bytes() == source.read_bytes()
    size = source.stat().st_size
    assert events[0] == {"stage": "download", "what": "source.bin", "done": 0, "total": size}
    assert events[-1] == {"stage": "download", "what": "source.bin", "done": size, "total": size}
    assert len(events) <= 4  # throttled: not one event per chunk
    assert sorted(p.name for p in path.parent.iterdir()) == ["file.bin"]  # no temp file left
    source.unlink()
    assert downloads.fetch(remote) == path  # cached: no second download
    assert capsys.readouterr().out == ""


def test_download_rejects_a_bad_hash_and_redownloads_a_damaged_cache(tmp_path, keras_home):
    source = tmp_path / "source.bin"
    source.write_bytes(b"the real content")
    good = hashlib.sha256(b"the real content").hexdigest()
    bad = downloads.Remote(source.as_uri(), "file.bin", "0" * 64)
    with pytest.raises(DatasetError, match=f"{source.as_uri()}: the downloaded file has SHA-256 {good}"):
        downloads.fetch(bad)
    assert not (keras_home / "datasets" / "file.bin").exists()
    assert list((keras_home / "datasets").iterdir()) == []
    (keras_home / "datasets" / "file.bin").write_bytes(b"damaged")
    assert downloads.fetch(downloads.Remote(source.as_uri(), "file.bin", good)).read_bytes() == b"the real content"


@pytest.mark.parametrize("url", ["file:///nonexistent/mnist.npz", "http://127.0.0.1:9/mnist.npz"])
def test_download_failure_names_the_url_and_the_offline_way(tmp_path, url):
    with pytest.raises(DatasetError) as info:
        downloads.download(url, tmp_path / "mnist.npz", hint="set dataset.path to a copy of mnist.npz")
    assert str(info.value).startswith(f"cannot download {url}: ")
    assert str(info.value).endswith("set dataset.path to a copy of mnist.npz")
    assert list(tmp_path.iterdir()) == []


def test_mnist_without_path_downloads_into_the_keras_cache(tmp_path, keras_home, monkeypatch):
    xtr, ytr, xte, yte = mnist_arrays()
    source = write_npz(tmp_path / "served.npz", x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    monkeypatch.setattr(downloads, "MNIST_NPZ", downloads.Remote(source.as_uri(), "mnist.npz", digest))
    events = []
    ds = load_dataset(DatasetConfig(name="mnist"), events.append)
    assert (keras_home / "datasets" / "mnist.npz").is_file()
    assert ds.x_train.shape == (12, 28, 28, 1) and events[-1]["done"] == source.stat().st_size
    monkeypatch.setattr(downloads, "MNIST_NPZ", downloads.Remote("file:///gone.npz", "mnist.npz", digest))
    assert load("mnist").y_test.tolist() == yte.tolist()  # from the cache


def test_fashion_mnist_and_cifar10_without_path_download_once(tmp_path, keras_home, monkeypatch):
    served = tmp_path / "served"
    write_idx_folder(served, gz=True)
    monkeypatch.setattr(downloads, "FASHION_MNIST", tuple(
        downloads.Remote(p.as_uri(), f"fashion-mnist/{p.name}", None) for p in sorted(served.iterdir())))
    ds = load("fashion_mnist")
    assert ds.class_names == FASHION_NAMES and len(ds.y_train) == 12
    assert len(list((keras_home / "datasets" / "fashion-mnist").iterdir())) == 4

    tarball = tar_folder(write_cifar10(tmp_path / "cifar-10-batches-py"), tmp_path / "cifar-10-python.tar.gz")
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    monkeypatch.setattr(downloads, "CIFAR10_TAR",
                        downloads.Remote(tarball.as_uri(), "cifar-10-batches-py-target_archive", digest))
    events = []
    ds = load_dataset(DatasetConfig(name="cifar10"), events.append)
    assert ds.x_train.shape == (20, 32, 32, 3)
    assert (keras_home / "datasets" / "cifar-10-batches-py-target_archive").read_bytes() == tarball.read_bytes()
    assert [e["stage"] for e in events][0] == "download" and events[-1]["stage"] == "read"
    tarball.unlink()
    assert load("cifar10").y_test.tolist() == ds.y_test.tolist()  # the cached archive, verified


def test_keras_hashes_and_names_match_keras_datasets():
    import importlib.util

    # Read keras's source without importing keras (which imports TensorFlow).
    folder = Path(importlib.util.find_spec("keras").submodule_search_locations[0]) / "src" / "datasets"
    source = "".join((folder / f).read_text() for f in ("mnist.py", "cifar10.py", "cifar100.py"))
    for remote in (downloads.MNIST_NPZ, downloads.CIFAR10_TAR, downloads.CIFAR100_TAR):
        assert remote.sha256 in source and remote.url.rsplit("/", 1)[-1] in source


# ---- image folders ---------------------------------------------------------------------------

def make_image_folder(root: Path, sizes=((16, 16), (9, 12), (20, 10), (16, 16), (8, 8))) -> Path:
    for cls, colour in (("cat", (200, 100, 50)), ("dog", (10, 20, 30))):
        (root / cls).mkdir(parents=True)
        for i, (h, w) in enumerate(sizes):
            (root / cls / f"{i}.png").write_bytes(encode_png(solid(h, w, colour)))
    return root


def test_image_folder_decodes_every_format_resizes_and_splits(tmp_path, capsys):
    import tensorflow as tf

    root = make_image_folder(tmp_path / "train")
    (root / "cat" / "j.jpg").write_bytes(tf.io.encode_jpeg(solid(10, 10)).numpy())
    write_bmp(root / "dog" / "b.BMP", solid(5, 7, (10, 20, 30)))
    (root / "dog" / "t.gif").write_bytes(TINY_GIF)
    (root / "dog" / "notes.txt").write_text("not an image")
    (root / "README").write_text("top-level file")
    (root / "cat" / "broken.png").write_bytes(b"\x89PNG not really")
    events = []
    ds = load_dataset(DatasetConfig(name="image_folder", path=str(root), image_size=(8, 8), test_split=0.25),
                      events.append)
    assert ds.class_names == ["cat", "dog"]
    assert ds.x_train.shape[1:] == (8, 8, 3) and ds.x_train.dtype == np.uint8
    assert len(ds.y_train) + len(ds.y_test) == 13 and ds.summary()["class_counts"] == [4, 5]
    assert np.bincount(ds.y_test).tolist() == [2, 2]
    x, y = np.concatenate([ds.x_train, ds.x_test]), np.concatenate([ds.y_train, ds.y_test])
    assert np.abs(x[y == 0].astype(int) - [200, 100, 50]).max() <= 3  # the JPEG is lossy, PNGs exact
    dogs = x[y == 1].reshape(7, -1, 3)
    assert sum(bool((d == [10, 20, 30]).all()) for d in dogs) == 6  # 5 PNGs and the BMP
    assert sum(bool((d == 0).all()) for d in dogs) == 1  # the GIF's one transparent pixel decodes black
    assert ds.warnings == ["ignored 2 files that are not images (by extension): README, dog/notes.txt",
                           "skipped 1 images that could not be decoded: cat/broken.png"]
    assert events[-1] == {"stage": "decode", "what": str(root), "done": 14, "total": 14}
    assert capsys.readouterr().out == ""


def test_image_folder_grayscale_with_a_test_folder(tmp_path):
    root = make_image_folder(tmp_path / "train")
    test = make_image_folder(tmp_path / "test", sizes=((12, 12),))
    ds = load("image_folder", root, test_path=str(test), color_mode="grayscale", image_size=(10, 12))
    assert ds.x_train.shape == (10, 10, 12, 1) and ds.x_test.shape == (2, 10, 12, 1)
    assert ds.y_test.tolist() == [0, 1]
    # ITU-R 601 luma of (200, 100, 50) is 124.2
    assert abs(int(ds.x_test[0, 0, 0, 0]) - 124) <= 1


def test_image_folder_bad_inputs_name_the_folder(tmp_path):
    raises(tmp_path / "missing", "no such file", name="image_folder", path=tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    raises(tmp_path / "empty", "the folder is empty", name="image_folder", path=tmp_path / "empty")
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "a.png").write_bytes(b"")
    raises(flat, "no class sub-folders", name="image_folder", path=flat)
    root = make_image_folder(tmp_path / "train")
    (root / "bird").mkdir()
    (root / "bird" / "x.txt").write_text("")
    raises(root / "bird", "class folder has no images", name="image_folder", path=root)
    (root / "bird" / "x.txt").unlink()
    (root / "bird").rmdir()
    other = tmp_path / "other"
    for cls in ("cat", "fox"):
        (other / cls).mkdir(parents=True)
        (other / cls / "a.png").write_bytes(encode_png(solid(8, 8)))
    raises(other, "differ from those of", "missing dog", "extra fox",
           name="image_folder", path=root, test_path=str(other))
    for i in range(5):
        (root / "dog" / f"{i}.png").write_bytes(b"garbage")
    raises(root / "dog", "none of the class's images could be decoded", name="image_folder", path=root)
