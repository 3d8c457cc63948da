"""TFRecord shards of ``tf.train.Example``: listing, the one-pass scan, the manifest.

The layout is the one TF Models' ImageNet scripts (and ``replica-studio prepare``) write:
``image/encoded`` (PNG/JPEG bytes), ``image/class/label`` (int64, ``label_offset`` for 1-based
sets), optional ``image/class/text``. Class names come, in this order, from the ``manifest.json``
``prepare`` writes, a ``labels.txt`` beside the shards (one name a line), the records'
``image/class/text``, else "0".."K-1".

Streaming needs the example count of every shard before training (steps per epoch, the
held-out splits), so a folder is scanned once: every record is read and parsed (which is also
what finds a truncated shard, a record without an image or a label out of range, naming the
file) and the counts are cached in ``.replica-studio-scan.json`` beside the shards, keyed by
each file's size and modification time.
"""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from gui_app.core.messages import first_line, typed_line
from gui_app.engine.datasets.base import MAX_CLASSES, DatasetError, ProgressCallback, Throttle

MANIFEST = "manifest.json"
SCAN_CACHE = ".replica-studio-scan.json"
LABELS_TXT = "labels.txt"
ENCODED, LABEL, TEXT = "image/encoded", "image/class/label", "image/class/text"
_SKIP_SUFFIXES = (".json", ".txt", ".md", ".lockfile", ".index")
MAX_TEXTS = 100_000  # class names kept per file in the scan cache


@dataclass
class ShardSet:
    """The shards of one part (train or test), each with its example count, in sorted order."""
    files: list[str]
    counts: list[int]
    class_names: list[str]
    texts: dict[int, str] = field(default_factory=dict)  # label -> image/class/text seen

    @property
    def examples(self) -> int:
        return int(sum(self.counts))

    @property
    def offsets(self) -> list[int]:
        out, total = [], 0
        for n in self.counts:
            out.append(total)
            total += n
        return out


def list_shards(spec: str, split: str | None = None) -> list[str]:
    """The TFRecord files of a folder (or of its manifest's ``split``) or of a glob, sorted."""
    p = Path(spec).expanduser()
    if p.is_dir():
        manifest = read_manifest(p)
        if manifest is not None and split is not None:
            names = [f["name"] for f in manifest.get("files", []) if f.get("split") == split]
            files = [str(p / n) for n in names]
            missing = [f for f in files if not Path(f).is_file()]
            if missing:
                raise DatasetError(f"{missing[0]}: listed in {p / MANIFEST} but missing")
        else:
            files = sorted(str(f) for f in p.iterdir() if f.is_file() and not f.name.startswith(".")
                           and not f.name.endswith(_SKIP_SUFFIXES))
        if not files:
            raise DatasetError(f"{p}: holds no TFRecord files" + (f" for the {split} split" if split else ""))
        return files
    files = sorted(f for f in glob.glob(os.path.expanduser(spec)) if Path(f).is_file())
    if not files:
        raise DatasetError(f"{spec}: matches no TFRecord files")
    return files


def read_manifest(folder: Path) -> dict | None:
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: not a readable manifest ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise DatasetError(f"{path}: not a replica-studio manifest (no 'files' list)")
    return data


def _known_classes(files: list[str]) -> list[str] | None:
    folder = Path(files[0]).parent
    manifest = read_manifest(folder)
    if manifest is not None and manifest.get("classes"):
        return [str(c) for c in manifest["classes"]]
    labels = folder / LABELS_TXT
    if labels.is_file():
        names = [line.strip() for line in labels.read_text(encoding="utf-8").splitlines() if line.strip()]
        return names or None
    return None


def file_key(path: str) -> list[int]:
    """What tells whether a shard changed since it was counted: its size and modification time
    (the key of its entry in the manifest and in the scan cache)."""
    st = os.stat(path)
    return [st.st_size, int(st.st_mtime_ns)]


def _counts_from_cache(files: list[str]) -> tuple[dict[str, dict], dict]:
    """Entries already known from the manifest or the scan cache, for files that did not change."""
    folder = Path(files[0]).parent
    known: dict[str, dict] = {}
    manifest = read_manifest(folder)
    cache: dict = {}
    try:
        cache = json.loads((folder / SCAN_CACHE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cache = {}
    entries = {f["name"]: f for f in (manifest or {}).get("files", [])}
    entries.update(cache.get("files", {}))
    for f in files:
        e = entries.get(Path(f).name)
        if e and e.get("key") == file_key(f) and isinstance(e.get("examples"), int):
            known[f] = e
    return known, cache


def scan(spec: str, label_offset: int = 0, split: str | None = None, class_names: list[str] | None = None,
         progress: ProgressCallback | None = None) -> ShardSet:
    """Count and check every record of the shards of ``spec``; DatasetError names a bad file."""
    files = list_shards(spec, split)
    classes = class_names or _known_classes(files)
    known, cache = _counts_from_cache(files)
    report = Throttle(progress)
    counts, texts, top = [], {}, -1
    for i, f in enumerate(files):
        entry = known.get(f)
        # Without known classes the labels' range matters: only scan-cache entries record it.
        if entry is not None and (classes is not None or (isinstance(entry.get("top"), int)
                                                          and entry.get("offset") == label_offset)):
            counts.append(entry["examples"])
            top = max(top, entry.get("top", -1))
            texts.update({int(k): v for k, v in entry.get("texts", {}).items()})
        else:
            n, file_top, file_texts = _scan_file(f, label_offset, classes)
            counts.append(n)
            top = max(top, file_top)
            texts.update(file_texts)
            cache.setdefault("files", {})[Path(f).name] = {
                "examples": n, "key": file_key(f), "top": file_top, "offset": label_offset,
                "texts": {str(k): v for k, v in list(file_texts.items())[:MAX_TEXTS]}}
        report("scan", spec, i + 1, len(files))
    if classes is None:
        if top >= MAX_CLASSES:
            raise DatasetError(f"{spec}: labels go up to {top}; expected class indices 0..K-1 "
                               f"(add a {LABELS_TXT} beside the shards)")
        k = top + 1
        classes = [texts.get(c, str(c)) for c in range(k)] if all(c in texts for c in range(k)) \
            else [str(c) for c in range(k)]
    try:  # a cache beside the shards; read-only folders simply scan again next time
        (Path(files[0]).parent / SCAN_CACHE).write_text(json.dumps(cache), encoding="utf-8")
    except OSError:
        pass
    return ShardSet(files, counts, classes, texts)


def _scan_file(path: str, label_offset: int, classes: list[str] | None) -> tuple[int, int, dict[int, str]]:
    import numpy as np
    import tensorflow as tf

    spec = {ENCODED: tf.io.FixedLenFeature([], tf.string, default_value=""),
            LABEL: tf.io.FixedLenFeature([], tf.int64, default_value=-(2**62)),
            TEXT: tf.io.FixedLenFeature([], tf.string, default_value="")}
    ds = tf.data.TFRecordDataset(path).batch(512).map(lambda r: tf.io.parse_example(r, spec))
    ds = ds.map(lambda e: (tf.strings.length(e[ENCODED]), e[LABEL], e[TEXT]))
    n, top, texts = 0, -1, {}
    try:
        for lengths, labels, text in ds:
            lengths, labels = lengths.numpy(), labels.numpy() - label_offset
            empty = np.flatnonzero(lengths == 0)
            if len(empty):
                raise DatasetError(f"{path}: record {n + int(empty[0])} has no {ENCODED} (image bytes)")
            if labels.min() < -(2**61):
                bad = int(np.argmin(labels))
                raise DatasetError(f"{path}: record {n + bad} has no {LABEL}")
            if labels.min() < 0:
                bad = int(np.argmin(labels))
                raise DatasetError(f"{path}: record {n + bad} has label {int(labels[bad]) + label_offset}, below "
                                   f"dataset.label_offset {label_offset}")
            if classes is not None and labels.max() >= len(classes):
                bad = int(np.argmax(labels))
                raise DatasetError(f"{path}: record {n + bad} has label {int(labels[bad]) + label_offset}, out of "
                                   f"range for {len(classes)} classes (0..{len(classes) - 1} after label_offset)")
            top = max(top, int(labels.max()))
            for label, t in zip(labels.tolist(), text.numpy().tolist()):
                if t and label not in texts:
                    texts[label] = t.decode("utf-8", "replace")
            n += len(labels)
    except tf.errors.DataLossError as exc:
        raise DatasetError(f"{path}: truncated or corrupt TFRecord file after {n} records "
                           f"({first_line(exc, 120)})") from None
    except tf.errors.OpError as exc:
        raise DatasetError(f"{path}: cannot be read as TFRecord ({typed_line(exc, 120)})") from None
    if n == 0:
        raise DatasetError(f"{path}: holds no records")
    return n, top, texts


def parse_record(serialized, label_offset: int):
    """A serialized Example -> (encoded image bytes, int32 label), inside a tf.data map."""
    import tensorflow as tf

    spec = {ENCODED: tf.io.FixedLenFeature([], tf.string), LABEL: tf.io.FixedLenFeature([], tf.int64)}
    ex = tf.io.parse_single_example(serialized, spec)
    return ex[ENCODED], tf.cast(ex[LABEL] - label_offset, tf.int32)
