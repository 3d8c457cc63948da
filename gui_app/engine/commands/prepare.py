"""``replica-studio prepare CONFIG --output DIR [--shards N]``: convert any dataset this app
reads (npz, IDX, CIFAR batches, the downloadable sets, image folders, TFRecord, TFDS) into
TFRecord shards of ``tf.train.Example`` that ``dataset.name: tfrecord`` streams:

    image/encoded      PNG bytes, at the dataset's size (image folders: dataset.image_size)
    image/class/label  int64, 0-based
    image/class/text   the class name

plus ``manifest.json`` (classes, image shape, per-split counts, per-file counts and keys so the
reader need not scan) and ``labels.txt``. The training split (train + validation) is written in
a seeded shuffled order, so every shard holds every class; the test split in its own order.

Progress goes to stderr as a bar, or with ``--json`` as JSON lines on stdout: ``progress``
events (gui_app.core.events.Progress: ``stage`` "write", ``what`` "images", ``done``, ``total``,
``images_per_sec``, ``message``), then ``{"type": "prepared", ...}``.
Exit codes: 0 written, 2 bad input (one line on stderr), 1 anything else.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from gui_app.core import answers
from gui_app.core.events import Progress, encode
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

COMMANDS = ("prepare",)
ORDER_SEED = 20240601
FORMAT = "replica-studio-tfrecord"


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("prepare", help="convert a dataset into TFRecord shards for streaming",
                              description="Write the dataset of CONFIG as TFRecord shards of tf.train.Example "
                                          "(image/encoded PNG, image/class/label, image/class/text) with a "
                                          "manifest.json, for dataset.name 'tfrecord'.")
    p.add_argument("config", help="run configuration file (JSON); only its dataset section is used")
    p.add_argument("--output", "-o", required=True, metavar="DIR", help="an empty or new folder")
    p.add_argument("--shards", type=int, default=None, metavar="N",
                   help="training shards (default: about 100 MB each, at least 1); test gets a quarter")
    p.add_argument("--json", action="store_true", help="JSON progress lines on stdout")
    p.add_argument("--debug", action="store_true", help="print tracebacks")
    p.set_defaults(handler=run)


class _Progress:
    def __init__(self, total: int, as_json: bool) -> None:
        self.total, self.as_json, self.start, self.last = total, as_json, time.monotonic(), 0.0

    def __call__(self, done: int, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < 0.25:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        if self.as_json:
            message = f"Writing {done:,} of {self.total:,} images ({rate:,.0f} images/s)"
            print(json.dumps(encode(Progress(time=time.time(), stage="write", what="images", done=done,
                                             total=self.total, images_per_sec=round(rate, 1), message=message))),
                  flush=True)
        else:
            filled = int(30 * done / max(self.total, 1))
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{self.total} images, {rate:,.0f}/s")
            if final:
                sys.stderr.write("\n")
            sys.stderr.flush()


def _parts(cfg):
    """(class names, image shape, {"train": (dataset of uint8 image, label), "test": ...}, counts)."""
    import numpy as np
    import tensorflow as tf

    from gui_app.engine.datasets import load_dataset
    from gui_app.engine.datasets.stream_read import decoded
    from gui_app.engine.datasets.streamed import OPENERS, open_stream

    if cfg.name in OPENERS:
        source = open_stream(cfg)
        pool = source.pool or source.train
        train = decoded(source, pool, file_seed=ORDER_SEED)
        return (source.class_names, source.input_shape,
                {"train": train, "test": decoded(source, source.test)},
                {"train": pool.examples, "test": source.test.examples}, source.warnings)
    data = load_dataset(cfg)
    order = np.random.default_rng(ORDER_SEED).permutation(len(data.y_train))
    # Slices of the arrays, a batch at a time: no from_tensor_slices copy of the whole set.

    def gen(x, y, idx):
        def g():
            for i in range(0, len(idx), 1024):
                sel = idx[i:i + 1024]
                yield x[sel], y[sel].astype(np.int32)
        sig = (tf.TensorSpec((None, *x.shape[1:]), tf.uint8), tf.TensorSpec((None,), tf.int32))
        return tf.data.Dataset.from_generator(g, output_signature=sig).unbatch()

    parts = {"train": gen(data.x_train, data.y_train, order),
             "test": gen(data.x_test, data.y_test, np.arange(len(data.y_test)))}
    return (data.class_names, data.input_shape, parts, {"train": len(data.y_train), "test": len(data.y_test)},
            data.warnings)


def prepare(cfg, output: Path, shards: int | None, progress) -> dict:
    import tensorflow as tf

    from gui_app.core.config_json import to_plain
    from gui_app.engine.datasets.shards import LABELS_TXT, MANIFEST, file_key

    class_names, shape, parts, counts, warnings = _parts(cfg)
    output.mkdir(parents=True, exist_ok=True)
    image_bytes = shape[0] * shape[1] * shape[2]
    if shards is None:  # about 100 MB of PNG per shard; PNG of small images is about the raw size
        shards = max(1, min(1024, counts["train"] * image_bytes // (100 * 2**20)))
    plan = {"train": shards, "test": max(1, shards // 4)}
    texts = [c.encode("utf-8") for c in class_names]
    files, done = [], 0
    report = _Progress(counts["train"] + counts["test"], progress)
    for split, ds in parts.items():
        n = plan[split]
        names = [f"{split}-{s:05d}-of-{n:05d}.tfrecord" for s in range(n)]
        writers = [tf.io.TFRecordWriter(str(output / name)) for name in names]
        written = [0] * n
        encoded = ds.map(lambda x, y: (tf.io.encode_png(x), y), num_parallel_calls=tf.data.AUTOTUNE,
                         deterministic=True).prefetch(256)
        for i, (data, label) in enumerate(encoded.as_numpy_iterator()):
            label = int(label)
            feature = {
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                "image/class/text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[texts[label]])),
            }
            writers[i % n].write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
            written[i % n] += 1
            done += 1
            report(done)
        for w in writers:
            w.close()
        counts[split] = sum(written)
        for name, k in zip(names, written):
            if k == 0:  # more shards than examples: no empty files for the reader to trip on
                (output / name).unlink()
            else:
                files.append({"name": name, "split": split, "examples": k, "key": file_key(str(output / name))})
    report(done, final=True)
    manifest = {"format": FORMAT, "version": 1, "classes": list(class_names), "image_shape": list(shape),
                "counts": counts, "files": files, "source": to_plain(cfg),
                "warnings": list(warnings)}
    (output / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    (output / LABELS_TXT).write_text("".join(f"{c}\n" for c in class_names), encoding="utf-8")
    return manifest


def run(args: argparse.Namespace) -> int:
    from gui_app.core.config import ConfigError, RunConfig
    from gui_app.engine.datasets.base import DatasetError

    try:
        config = RunConfig.load(args.config)
        if args.shards is not None and not 1 <= args.shards <= 100_000:
            raise ConfigError(f"--shards: must be in [1, 100000]; got {args.shards}")
        output = Path(args.output)
        if output.exists() and (not output.is_dir() or any(output.iterdir())):
            raise ConfigError(f"--output: {output} exists and is not an empty folder")
        dataset = config.dataset
        started = time.monotonic()
        manifest = prepare(dataset, output, args.shards, args.json)
        seconds = time.monotonic() - started
        total = sum(manifest["counts"].values())
        result = answers.encode(answers.Prepared("prepared", str(output), manifest["counts"], len(manifest["classes"]),
                                 len(manifest["files"]), round(seconds, 3), round(total / max(seconds, 1e-9), 1)))
        if args.json:
            print(json.dumps(result), flush=True)
        else:
            print(f"wrote {total} images ({manifest['counts']['train']} train, {manifest['counts']['test']} test) "
                  f"in {len(manifest['files'])} shards to {output} ({result['images_per_sec']:,.0f} images/s)")
        return EXIT_OK
    except (ConfigError, DatasetError) as exc:
        if args.debug:
            traceback.print_exc()
        print(f"replica-studio prepare: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"replica-studio prepare: {exc.filename or args.output}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - our bug: keep the traceback
        traceback.print_exc()
        print(f"replica-studio prepare: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
