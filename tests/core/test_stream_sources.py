"""Streamed sources and pipelines (issue 10): every format streams from files written here,
two input pipelines read disjoint examples that together cover the set, held-out parts are
disjoint with exact counts, headers reveal decompression bombs, prepare round-trips."""
from __future__ import annotations

import json

import numpy as np
import pytest
from stream_files import bomb_png, image_index, indexed_image, png, write_image_folder, write_tfrecords

from gui_app.core.config import ConfigError, DatasetConfig, RunConfig
from gui_app.engine.datasets.base import DatasetError

GREY8 = {"image_size": (8, 8), "color_mode": "grayscale"}


def _indices(ds) -> list[int]:
    return [image_index(x) for x, _ in ds.as_numpy_iterator()]


def _pipelines_cover(source, part, expected: set[int]) -> None:
    from gui_app.engine.datasets.stream_read import decoded

    seen = [_indices(decoded(source, part, 2, pid, file_seed=5)) for pid in (0, 1)]
    assert seen[0] and seen[1]
    assert not set(seen[0]) & set(seen[1])  # disjoint
    assert set(seen[0]) | set(seen[1]) == expected  # covering
    assert len(seen[0]) + len(seen[1]) == len(expected)


@pytest.mark.parametrize("shards", [4, 1])  # 4 files: shard by file; 1 file: shard by example
def test_tfrecord_two_pipelines_are_disjoint_and_cover_the_set(tmp_path, shards):
    from gui_app.engine.datasets.streamed import open_stream

    write_tfrecords(tmp_path / "s", 300, shards=shards)
    source = open_stream(DatasetConfig(name="tfrecord", path=str(tmp_path / "s"), validation="none", **GREY8))
    assert source.class_names == ["class0", "class1", "class2"]  # from image/class/text
    assert source.train.examples + source.test.examples == 300
    from gui_app.engine.datasets.stream_read import decoded

    train = set(_indices(decoded(source, source.train)))
    test = set(_indices(decoded(source, source.test)))
    assert len(train) == source.train.examples and len(test) == source.test.examples
    assert not train & test and train | test == set(range(300))
    _pipelines_cover(source, source.train, train)


def test_hashed_validation_split_has_exact_counts(tmp_path):
    from gui_app.engine.datasets.stream_read import decoded
    from gui_app.engine.datasets.streamed import open_stream

    write_tfrecords(tmp_path / "s", 400, shards=3)
    source = open_stream(DatasetConfig(name="tfrecord", path=str(tmp_path / "s"), validation_split=0.25, **GREY8))
    parts = {name: set(_indices(decoded(source, getattr(source, name)))) for name in ("train", "val", "test")}
    for name, got in parts.items():
        assert len(got) == getattr(source, name).examples
    assert sum(map(len, parts.values())) == 400 and set().union(*parts.values()) == set(range(400))


def test_image_folder_streams_and_refuses_a_bomb_by_its_header(tmp_path):
    from gui_app.engine.datasets.streamed import open_stream

    write_image_folder(tmp_path / "imgs", 150)
    (tmp_path / "imgs" / "c2" / "huge.png").write_bytes(bomb_png(50000, 50000))
    source = open_stream(DatasetConfig(name="image_folder", path=str(tmp_path / "imgs"), validation="none", **GREY8))
    assert source.skipped == 1 and "huge.png" in source.warnings[-1]
    assert source.train.examples + source.test.examples == 150
    expected = {image_index(indexed_image(int(p[-9:-4]))) for p in source.train.files}
    _pipelines_cover(source, source.train, expected)


def test_image_headers_give_sizes_without_decoding():
    import tensorflow as tf

    from gui_app.core.config import MAX_IMAGE_PIXELS
    from gui_app.engine.datasets.image_header import dimensions as image_size

    assert image_size(bomb_png(123, 45)) == (123, 45)
    jpeg = tf.io.encode_jpeg(np.zeros((21, 34, 3), np.uint8)).numpy()
    assert image_size(jpeg) == (34, 21)
    assert image_size(png(np.zeros((5, 7, 1), np.uint8))) == (7, 5)
    assert image_size(b"GIF89a\x10\x00\x20\x00") == (16, 32)
    assert image_size(b"not an image") is None
    assert 30000 * 30000 > MAX_IMAGE_PIXELS


def test_stream_config_keys_are_validated():
    with pytest.raises(ConfigError, match="dataset.loading"):
        DatasetConfig(loading="lazy")
    with pytest.raises(ConfigError, match="dataset.tfds_name"):
        DatasetConfig(name="tfds")
    with pytest.raises(ConfigError, match="dataset.label_offset"):
        DatasetConfig(name="npz", path="x.npz", label_offset=1)
    with pytest.raises(ConfigError, match="dataset.memory_budget_mb"):
        DatasetConfig(memory_budget_mb=0)
    cfg = RunConfig.from_dict({"dataset": {"name": "tfrecord", "path": "/data/shards", "test_path": "/data/test",
                                           "label_offset": 1, "loading": "stream", "cache": "file"}})
    assert RunConfig.from_json(cfg.to_json()) == cfg


def test_auto_loading_streams_above_the_memory_budget(tmp_path, monkeypatch):
    from gui_app.core.memory import BUDGET_ENV
    from gui_app.engine.datasets.base import Dataset
    from gui_app.engine.datasets.loading import open_input
    from gui_app.engine.datasets.streamed import StreamSource

    write_tfrecords(tmp_path / "s", 200, shards=2)
    cfg = DatasetConfig(name="tfrecord", path=str(tmp_path / "s"), **GREY8)
    monkeypatch.setenv(BUDGET_ENV, "1")  # 1 MB: 200 x 8 x 8 bytes fit
    data = open_input(cfg)
    assert isinstance(data, Dataset) and len(data.y_train) + len(data.y_test) == 200
    big = DatasetConfig(name="tfrecord", path=str(tmp_path / "s"), image_size=(128, 128))  # 200 x 49 kB > 1 MB
    stream = open_input(big)
    assert isinstance(stream, StreamSource) and stream.train.examples > 0


def test_in_memory_loading_is_aligned_and_the_auto_cache_counts_what_it_holds(tmp_path):
    from dataclasses import replace

    from gui_app.engine.datasets.loading import decoded_bytes, resolve_cache
    from gui_app.engine.datasets.stream_read import ALIGN, load_into_memory
    from gui_app.engine.datasets.streamed import open_stream

    write_tfrecords(tmp_path / "s", 400, shards=2)
    source = open_stream(DatasetConfig(name="tfrecord", path=str(tmp_path / "s"), **GREY8))
    data = load_into_memory(source)  # decoded in place: TensorFlow can share the arrays (pipeline.host_tensor)
    assert data.x_train.ctypes.data % ALIGN == 0 and data.x_test.ctypes.data % ALIGN == 0
    assert len(data.y_train) == source.pool.examples and len(data.y_test) == source.test.examples
    # A memory cache holds the training examples and the validation ones: both count against the budget.
    cfg = DatasetConfig(name="tfrecord", path=str(tmp_path / "s"), image_size=(128, 128), loading="stream")
    source = open_stream(cfg)
    train, both = decoded_bytes(source, ("train",)), decoded_bytes(source, ("train", "val"))
    fits_train = -(-train // 2**20)
    assert both > fits_train * 2**20
    assert resolve_cache(replace(cfg, memory_budget_mb=fits_train), source) == "none"
    assert resolve_cache(replace(cfg, memory_budget_mb=-(-both // 2**20)), source) == "memory"


def test_a_label_outside_the_class_count_names_the_file(tmp_path):
    from gui_app.engine.datasets.shards import scan

    paths = write_tfrecords(tmp_path / "s", 30, shards=2, classes=5)
    (tmp_path / "s" / "labels.txt").write_text("a\nb\nc\n")
    with pytest.raises(DatasetError, match=r"out of range for 3 classes") as info:
        scan(str(tmp_path / "s"))
    assert str(paths[0]) in str(info.value) or str(paths[1]) in str(info.value)


@pytest.mark.parametrize("name", ["npz", "image_folder", "tfrecord"])
def test_prepare_converts_a_format_into_shards_that_stream_back(tmp_path, name):
    from gui_app.engine.commands.prepare import prepare
    from gui_app.engine.datasets.streamed import open_stream

    if name == "npz":
        x = np.stack([indexed_image(i) for i in range(120)])
        np.savez(tmp_path / "d.npz", x_train=x[:100], y_train=np.arange(100) % 3, x_test=x[100:],
                 y_test=np.arange(100, 120) % 3)
        cfg = DatasetConfig(name="npz", path=str(tmp_path / "d.npz"))
    elif name == "image_folder":
        write_image_folder(tmp_path / "imgs", 120)
        cfg = DatasetConfig(name="image_folder", path=str(tmp_path / "imgs"), **GREY8)
    else:
        write_tfrecords(tmp_path / "s", 120, shards=1)
        cfg = DatasetConfig(name="tfrecord", path=str(tmp_path / "s"), **GREY8)
    manifest = prepare(cfg, tmp_path / "out", 3, False)
    assert sum(manifest["counts"].values()) == 120
    assert len([f for f in manifest["files"] if f["split"] == "train"]) == 3
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["classes"] == manifest["classes"]
    assert manifest["source"]["name"] == name and manifest["source"]["path"] == cfg.path  # where the shards came from
    back = open_stream(DatasetConfig(name="tfrecord", path=str(tmp_path / "out"), validation="none", **GREY8))
    from gui_app.engine.datasets.stream_read import decoded

    seen = _indices(decoded(back, back.train)) + _indices(decoded(back, back.test))
    assert sorted(seen) == list(range(120))  # every image once, pixels intact (PNG is lossless)
    assert back.train.examples == manifest["counts"]["train"]


@pytest.fixture(scope="module")
def tiny_tfds(tmp_path_factory):
    """A TFDS set prepared on disk by tests/engine/tfds_builder.py in its own process (no
    download); here TFDS reads it from its files alone, as the engine does."""
    pytest.importorskip("tensorflow_datasets", reason="tensorflow-datasets (the [tfds] extra) is not installed")
    import subprocess
    import sys
    from pathlib import Path

    from gui_app.identity import app_env

    data_dir = tmp_path_factory.mktemp("tfds")
    builder = Path(__file__).resolve().parents[1] / "engine" / "tfds_builder.py"
    subprocess.run([sys.executable, str(builder), str(data_dir)], check=True, env=app_env(), capture_output=True,
                   timeout=300)
    return data_dir


def test_tfds_streams_a_prepared_dataset(tiny_tfds):
    from gui_app.engine.datasets.stream_read import decoded
    from gui_app.engine.datasets.streamed import open_stream

    source = open_stream(DatasetConfig(name="tfds", tfds_name="tiny_indexed", data_dir=str(tiny_tfds), **GREY8))
    assert source.class_names == ["a", "b", "c"]
    assert (source.train.examples, source.val.examples, source.test.examples) == (216, 24, 60)
    train = set(_indices(decoded(source, source.train)))
    assert len(train) == 216 and not train & set(_indices(decoded(source, source.test)))
    _pipelines_cover(source, source.train, train)


def test_the_scan_is_cached_beside_the_shards_and_redone_when_a_shard_changes(tmp_path, monkeypatch):
    from gui_app.engine.datasets import shards

    paths = write_tfrecords(tmp_path / "s", 90, shards=3)
    first = shards.scan(str(tmp_path / "s"))
    assert (tmp_path / "s" / shards.SCAN_CACHE).is_file()
    scanned = []
    real = shards._scan_file
    monkeypatch.setattr(shards, "_scan_file", lambda *a: scanned.append(a[0]) or real(*a))
    again = shards.scan(str(tmp_path / "s"))
    assert scanned == [] and (again.counts, again.class_names) == (first.counts, first.class_names)
    write_tfrecords(tmp_path / "s", 10, shards=1, prefix="train-extra")
    shards.scan(str(tmp_path / "s"))
    assert scanned == [str(tmp_path / "s" / "train-extra-00000-of-00001.tfrecord")]
    del paths
