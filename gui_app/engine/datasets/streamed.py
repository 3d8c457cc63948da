"""Datasets read from files during training instead of being decoded up front.

:func:`open_stream` turns a ``dataset`` config section into a :class:`StreamSource`: the
class names, the input shape, and three :class:`Part` s (train, validation, test), each a
list of files with exact example counts. ``gui_app.engine.training.streaming`` builds the
tf.data pipelines from them; nothing here holds images in memory.

Held-out examples: image folders split as in memory (``stratified_split`` for the test set,
the seeded validation permutation of ``pipeline.validation_rows``), so both loading modes train on the
same examples. TFRecord sets without a ``test_path`` (or a manifest test split) and the
validation split of TFRecord and TFDS sets are chosen by a hash of each example's global index
(``index * prime % 1000 < fraction * 1000``): stable for a set of shards, exact to 0.1 %, and
computable inside the pipeline without reading the whole set first.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gui_app.core.config import DatasetConfig
from gui_app.core.messages import first_line
from gui_app.engine.datasets import shards
from gui_app.engine.datasets.base import DatasetError, ProgressCallback, Throttle, few, stratified_split
from gui_app.engine.datasets.shards import ShardSet

TEST_PRIME, VAL_PRIME = 7919, 104729  # both coprime to 1000: each residue class is hit equally
Keep = tuple[int, int, bool]  # (prime, threshold, wanted): index * prime % 1000 < threshold is wanted


@dataclass
class Part:
    """One split of a streamed set. ``kind``: records (TFRecord shards), files (image files), tfds."""
    kind: str
    examples: int
    files: list[str] = field(default_factory=list)  # shards, or image paths
    counts: list[int] = field(default_factory=list)  # records per shard
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # files: the label of each image
    keep: tuple[Keep, ...] = ()  # records: the hashed hold-outs on the global index, all of them met
    tfds_split: str = ""
    class_counts: list[int] | None = None
    bytes_per_example: float = 0.0  # records: encoded size on disk, to bound the shuffle buffer's memory

    @property
    def offsets(self) -> list[int]:
        return [int(v) for v in np.concatenate([[0], np.cumsum(self.counts)[:-1]])] if self.counts else []


@dataclass
class StreamSource:
    """What the engine and the models need to know about a streamed set (``Dataset``'s shape)."""
    name: str
    class_names: list[str]
    input_shape: tuple[int, int, int]
    train: Part
    val: Part | None
    test: Part
    label_offset: int = 0
    warnings: list[str] = field(default_factory=list)
    skipped: int = 0  # image files refused before training (decompression bombs, bad headers)
    tfds_builder: Any = None
    pool: Part | None = None  # train + validation before the validation hold-out (loading: memory)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def summary(self) -> dict[str, Any]:
        out = {"name": self.name, "class_names": list(self.class_names), "input_shape": list(self.input_shape),
               "train_examples": self.train.examples + (self.val.examples if self.val else 0),
               "test_examples": self.test.examples, "streamed": True, "skipped_images": self.skipped}
        if self.train.class_counts is not None:
            out["class_counts"] = self.train.class_counts
        return out


def _hashed_count(total: int, keep: tuple[Keep, ...]) -> int:
    i = np.arange(total, dtype=np.int64)
    mask = np.ones(total, bool)
    for prime, threshold, wanted in keep:
        mask &= ((i * prime) % 1000 < threshold) == wanted
    return int(mask.sum())


def _thousandths(fraction: float) -> int:
    return int(round(fraction * 1000))


def _record_parts(cfg: DatasetConfig, train_set: ShardSet, test_set: ShardSet | None
                  ) -> tuple[Part, Part | None, Part, Part]:
    """train, validation, test, and the pool (train and validation) of a set of shards."""
    total = train_set.examples
    holdout: tuple[Keep, ...] = ()
    if test_set is None:
        holdout = ((TEST_PRIME, _thousandths(cfg.test_split), False),)
        test = Part("records", 0, train_set.files, train_set.counts,
                    keep=((TEST_PRIME, _thousandths(cfg.test_split), True),))
    else:
        test = Part("records", test_set.examples, test_set.files, test_set.counts)
    val = None
    if cfg.validation == "split":
        val = Part("records", 0, train_set.files, train_set.counts,
                   keep=holdout + ((VAL_PRIME, _thousandths(cfg.validation_split), True),))
        holdout = holdout + ((VAL_PRIME, _thousandths(cfg.validation_split), False),)
    train = Part("records", 0, train_set.files, train_set.counts, keep=holdout)
    pool = Part("records", 0, train_set.files, train_set.counts,
                keep=tuple(k for k in holdout if k[0] == TEST_PRIME))
    for part in (train, val, pool):
        if part is not None:
            part.examples = _hashed_count(total, part.keep) if part.keep else total
    if test.keep:
        test.examples = _hashed_count(total, test.keep)
    if cfg.validation == "test":
        val = test
    return train, val, test, pool


def open_tfrecord(cfg: DatasetConfig, progress: ProgressCallback | None = None) -> StreamSource:
    spec = cfg.path
    assert spec is not None  # DatasetConfig requires a path for tfrecord
    train_set = shards.scan(spec, cfg.label_offset, "train", progress=progress)
    test_set = None
    root = Path(spec).expanduser()
    manifest = shards.read_manifest(root) if root.is_dir() else None
    if cfg.test_path:
        test_set = shards.scan(cfg.test_path, cfg.label_offset, "test", train_set.class_names, progress)
    elif manifest is not None and any(f.get("split") == "test" for f in manifest["files"]):
        test_set = shards.scan(spec, cfg.label_offset, "test", train_set.class_names, progress)
    channels = 3 if cfg.color_mode == "rgb" else 1
    train, val, test, pool = _record_parts(cfg, train_set, test_set)
    per = sum(Path(f).stat().st_size for f in train_set.files) / max(train_set.examples, 1)
    for part in (train, val, test, pool):
        if part is not None:
            part.bytes_per_example = per
    if train.examples == 0 or test.examples == 0:
        raise DatasetError(f"{cfg.path}: too few records to hold out a test set; set dataset.test_path")
    return StreamSource("tfrecord", train_set.class_names, (*cfg.image_size, channels), train, val, test,
                        cfg.label_offset, pool=pool)


def open_image_folder(cfg: DatasetConfig, progress: ProgressCallback | None = None) -> StreamSource:
    from gui_app.engine.datasets.base import require_path
    from gui_app.engine.datasets.image_header import check_file
    from gui_app.engine.datasets.images import scan_class_folders

    root = require_path(cfg.path, "dataset 'image_folder'")
    report = Throttle(progress)
    warnings: list[str] = []
    skipped: list[str] = []

    def listing(folder: Path, classes: list[str] | None):
        files, names, ignored = scan_class_folders(folder)
        if classes is not None and names != classes:
            raise DatasetError(f"{folder}: its class folders differ from those of {root}")
        if ignored:
            warnings.append(f"ignored {len(ignored)} files that are not images (by extension): {few(ignored)}")
        paths, labels = [], []
        jobs = [(label, p) for label, name in enumerate(names) for p in files[name]]
        for n, (label, p) in enumerate(jobs):
            why = check_file(p, cfg.max_image_pixels)  # header only: a bomb is never decoded
            if why is None:
                paths.append(str(p))
                labels.append(label)
            else:
                skipped.append(f"{p.relative_to(folder)} ({why})")
            report("scan", str(folder), n + 1, len(jobs))
        return names, paths, np.asarray(labels, np.int64)

    class_names, paths, labels = listing(root, None)
    if cfg.test_path:
        _, test_paths, test_labels = listing(require_path(cfg.test_path, "dataset.test_path"), class_names)
    else:
        train_idx, test_idx = stratified_split(labels, cfg.test_split)
        test_paths, test_labels = [paths[i] for i in test_idx], labels[test_idx]
        paths, labels = [paths[i] for i in train_idx], labels[train_idx]
    if skipped:
        warnings.append(f"skipped {len(skipped)} images before training: {few(skipped, 3)}")
    pool = _files_part(paths, labels, len(class_names))
    val = None
    if cfg.validation == "split":  # the same held-out examples as pipeline.validation_rows in memory
        order = np.random.default_rng(20240607).permutation(len(paths))
        n_val = max(1, int(round(len(paths) * cfg.validation_split)))
        val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])
        val = _files_part([paths[i] for i in val_idx], labels[val_idx], len(class_names))
        paths, labels = [paths[i] for i in train_idx], labels[train_idx]
    test = _files_part(test_paths, test_labels, len(class_names))
    if cfg.validation == "test":
        val = test
    channels = 3 if cfg.color_mode == "rgb" else 1
    return StreamSource("image_folder", class_names, (*cfg.image_size, channels),
                        _files_part(paths, labels, len(class_names)), val, test, 0, warnings, len(skipped),
                        pool=pool)


def _files_part(paths: list[str], labels: np.ndarray, k: int) -> Part:
    return Part("files", len(paths), paths, labels=labels.astype(np.int64),
                class_counts=np.bincount(labels, minlength=k).tolist())


def open_tfds(cfg: DatasetConfig, progress: ProgressCallback | None = None) -> StreamSource:
    """A TFDS set already prepared in ``data_dir``; held-out parts are TFDS sub-splits
    (``train[:72%]``), which TFDS reads exactly and counts from its metadata."""
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        raise DatasetError("dataset 'tfds' needs tensorflow-datasets: pip install 'replica-studio[tfds]'") from None
    where = cfg.data_dir or "the TFDS data folder"
    try:
        builder = tfds.builder(cfg.tfds_name, data_dir=cfg.data_dir)
        info = builder.info
        splits = info.splits
        prepared = builder.is_prepared() if hasattr(builder, "is_prepared") else True
    except Exception as exc:  # noqa: BLE001 - TFDS raises many kinds for "not prepared"
        raise DatasetError(f"{where}: no prepared TFDS dataset {cfg.tfds_name!r} "
                           f"({first_line(exc, 160)})") from None
    if not prepared or "train" not in splits:
        raise DatasetError(f"{where}: TFDS dataset {cfg.tfds_name!r} has no prepared 'train' split "
                           "(this app never downloads)")
    if "label" not in info.features or "image" not in info.features:
        raise DatasetError(f"{cfg.tfds_name}: needs 'image' and 'label' features; has {list(info.features)}")
    class_names = [str(n) for n in info.features["label"].names]

    def part(split: str) -> Part:
        return Part("tfds", int(splits[split].num_examples), tfds_split=split)

    pool_end = 100
    if "test" in splits:
        test = part("test")
    else:
        pool_end = 100 - max(1, int(round(cfg.test_split * 100)))
        test = part(f"train[{pool_end}%:]")
    pool = part(f"train[:{pool_end}%]" if pool_end < 100 else "train")
    val = None
    train = pool
    if cfg.validation == "split":
        cut = pool_end - max(1, int(round(cfg.validation_split * 100)))
        val, train = part(f"train[{cut}%:{pool_end}%]"), part(f"train[:{cut}%]")
    elif cfg.validation == "test":
        val = test
    channels = 3 if cfg.color_mode == "rgb" else 1
    return StreamSource("tfds", class_names, (*cfg.image_size, channels), train, val, test, tfds_builder=builder,
                        pool=pool)


OPENERS = {"tfrecord": open_tfrecord, "image_folder": open_image_folder, "tfds": open_tfds}


def open_stream(cfg: DatasetConfig, progress: ProgressCallback | None = None) -> StreamSource:
    if cfg.name not in OPENERS:
        raise DatasetError(f"dataset.loading: dataset {cfg.name!r} cannot stream (only "
                           f"{', '.join(OPENERS)}); use loading 'memory', or prepare it as TFRecord shards")
    try:
        return OPENERS[cfg.name](cfg, progress)
    except OSError as exc:
        raise DatasetError(f"{exc.filename or cfg.path}: {exc.strerror or exc}") from None
