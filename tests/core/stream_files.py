"""Files the streaming tests write: TFRecord shards and image folders whose images carry
their own index in the first two pixels (so a test can tell which examples it saw)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def indexed_image(i: int, size: int = 8, channels: int = 1, label: int = 0) -> np.ndarray:
    img = np.full((size, size, channels), 40 * (label % 6), np.uint8)
    img[0, 0, :], img[0, 1, :] = i % 256, i // 256
    return img


def image_index(x: np.ndarray) -> int:
    """The index from a decoded image (uint8 or scaled to [0, 1])."""
    if x.dtype != np.uint8:
        x = np.rint(x * 255).astype(np.uint8)
    return int(x[0, 0, 0]) + 256 * int(x[0, 1, 0])


def png(img: np.ndarray) -> bytes:
    import tensorflow as tf

    return tf.io.encode_png(img).numpy()


def example(encoded: bytes | None, label: int | None, text: str | None = None) -> bytes:
    import tensorflow as tf

    feats = {}
    if encoded is not None:
        feats["image/encoded"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded]))
    if label is not None:
        feats["image/class/label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
    if text is not None:
        feats["image/class/text"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()


def write_tfrecords(folder: Path, n: int, shards: int = 4, classes: int = 3, size: int = 8, channels: int = 1,
                    prefix: str = "train", start: int = 0, label_offset: int = 0) -> list[Path]:
    import tensorflow as tf

    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{prefix}-{s:05d}-of-{shards:05d}.tfrecord" for s in range(shards)]
    writers = [tf.io.TFRecordWriter(str(p)) for p in paths]
    for i in range(start, start + n):
        label = i % classes
        writers[i % shards].write(example(png(indexed_image(i, size, channels, label)), label + label_offset,
                                          f"class{label}"))
    for w in writers:
        w.close()
    return paths


def write_image_folder(root: Path, n: int, classes: int = 3, size: int = 8, channels: int = 1) -> None:
    for i in range(n):
        label = i % classes
        d = root / f"c{label}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{i:05d}.png").write_bytes(png(indexed_image(i, size, channels, label)))


def bomb_png(width: int = 30000, height: int = 30000) -> bytes:
    """A valid PNG header claiming width x height pixels (never meant to be decoded)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:  # length, type, data, CRC
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 1000))
            + chunk(b"IEND", b""))


def write_config(path: Path, dataset: dict, **sections) -> Path:
    cfg = {"dataset": dataset, "model": {"name": "mlp"},
           "training": {"epochs": 1, "global_batch_size": 16, "seed": 3, "steps_per_call": 2},
           "strategy": {"name": "default"}}
    for k, v in sections.items():
        cfg[k] = {**cfg.get(k, {}), **v}
    path.write_text(json.dumps(cfg))
    return path
