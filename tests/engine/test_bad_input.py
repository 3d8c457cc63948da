"""The bad-input matrix: every case runs the real command line and must end with exit 2, one
line on stderr, and nothing half-written (no new run directory; a run's status unchanged).

Most cases fail before TensorFlow starts (config, lock, numpy datasets); the few that need it
(image decoding, model files, checkpoints) run two at a time with the rest. The other commands'
refusals (paths, hosts, empty options, sweep folders) are test_bad_input_commands.py.
"""
from __future__ import annotations

import gzip
import json
import shutil
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from engine_helpers import config_dict, run_cli

from gui_app.core import rundir

EPOCH = {"training": {"epochs": 1}}


def _config(tmp: Path, **sections) -> Path:
    data = config_dict(**{**EPOCH, **sections})
    path = tmp / "config.json"
    path.write_text(json.dumps(data))
    return path


def _train(tmp: Path, **sections) -> list[str]:
    return ["train", str(_config(tmp, **sections)), "--runs-dir", str(tmp / "runs")]


def _raw(tmp: Path, text: str | bytes) -> list[str]:
    path = tmp / "config.json"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return ["train", str(path), "--runs-dir", str(tmp / "runs")]


def _npz(tmp: Path, **arrays) -> list[str]:
    rng = np.random.default_rng(0)
    base = {"x_train": rng.integers(0, 255, (40, 8, 8, 1), dtype=np.uint8), "y_train": np.arange(40) % 4,
            "x_test": rng.integers(0, 255, (12, 8, 8, 1), dtype=np.uint8), "y_test": np.arange(12) % 4}
    base.update(arrays)
    np.savez(tmp / "data.npz", **{k: v for k, v in base.items() if v is not None})
    return _train(tmp, dataset={"name": "npz", "path": str(tmp / "data.npz")})


def _idx(tmp: Path, damage: Callable[[dict[str, bytes]], None]) -> list[str]:
    folder = tmp / "idx"
    folder.mkdir()

    def images(n):
        return struct.pack(">IIII", 0x803, n, 8, 8) + bytes(n * 64)

    def labels(n):
        return struct.pack(">II", 0x801, n) + bytes(i % 3 for i in range(n))
    files = {"train-images-idx3-ubyte": images(30), "train-labels-idx1-ubyte": labels(30),
             "t10k-images-idx3-ubyte": images(9), "t10k-labels-idx1-ubyte": labels(9)}
    damage(files)
    for name, blob in files.items():
        (folder / name).write_bytes(blob)
    return _train(tmp, dataset={"name": "idx", "path": str(folder)})


def _png(width: int, height: int, pixel: bytes = b"\x80") -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + pixel * width for _ in range(min(height, 64)))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _folder(tmp: Path, classes: dict[str, list[bytes]], extra: Callable[[Path], None] | None = None) -> list[str]:
    root = tmp / "images"
    root.mkdir()
    for name, blobs in classes.items():
        (root / name).mkdir()
        for i, blob in enumerate(blobs):
            (root / name / f"{i}.png").write_bytes(blob)
    if extra:
        extra(root)
    return _train(tmp, dataset={"name": "image_folder", "path": str(root), "image_size": [8, 8]},
                  model={"name": "mlp"})


GOOD = [_png(8, 8)] * 3


def _symlink_loop(root: Path) -> None:
    (root / "b" / "loop").symlink_to(root / "b")
    (root / "b" / "self.png").symlink_to(root / "b" / "self.png")


def _lambda_keras(tmp: Path, _run=None) -> list[str]:
    import keras

    inputs = keras.Input((8, 8, 1))
    out = keras.layers.Dense(10)(keras.layers.Flatten()(keras.layers.Lambda(lambda x: x * 2.0)(inputs)))
    keras.Model(inputs, out).save(tmp / "lambda.keras")
    return _train(tmp, model={"name": "keras_file", "path": str(tmp / "lambda.keras")})


def _wrong_input_keras(tmp: Path, _run=None) -> list[str]:
    import keras

    inputs = keras.Input((28, 28, 3))
    keras.Model(inputs, keras.layers.Dense(10)(keras.layers.Flatten()(inputs))).save(tmp / "wrong.keras")
    return _train(tmp, model={"name": "keras_file", "path": str(tmp / "wrong.keras")})


def _run_copy(tmp: Path, trained: Path, change: Callable[[Path], None]) -> Path:
    run = tmp / "run"
    shutil.copytree(trained, run)
    change(run)
    return run


def _damage_all_checkpoints(run: Path) -> None:
    (run / "model.keras").unlink()
    for data in (run / "checkpoints").glob("ckpt-*.data-*"):
        data.write_bytes(b"\x00garbage" * 64)


@dataclass
class Case:
    id: str
    build: Callable  # (tmp, trained_run) -> argv
    expect: str  # in the one stderr line
    needs_run: bool = False


CASES = [
    # ---- config files -----------------------------------------------------------------
    Case("not-json", lambda t, r: _raw(t, "{not json"), "config: not valid JSON"),
    Case("empty-file", lambda t, r: _raw(t, ""), "config: not valid JSON"),
    Case("missing-file", lambda t, r: ["train", str(t / "nope.json"), "--runs-dir", str(t / "runs")], "cannot read"),
    Case("config-is-a-folder", lambda t, r: ["train", str(t), "--runs-dir", str(t / "runs")], "config: cannot read"),
    Case("not-utf8", lambda t, r: _raw(t, b'{"dataset": {"name": "caf\xe9"}}'), "is not UTF-8 text"),
    Case("deep-nesting", lambda t, r: _raw(t, "[" * 5000 + "]" * 5000), "config: nested too deeply"),
    Case("huge-integer", lambda t, r: _raw(t, '{"training": {"epochs": ' + "9" * 5000 + "}}"), "config: Exceeds the limit"),
    Case("top-level-list", lambda t, r: _raw(t, "[1, 2]"), "config: must be an object"),
    Case("nan-rate", lambda t, r: _raw(t, '{"training": {"learning_rate": NaN}}'), "training.learning_rate: must be a finite number; got NaN"),
    Case("infinite-rate", lambda t, r: _raw(t, '{"training": {"learning_rate": Infinity}}'), "training.learning_rate: must be a finite number"),
    Case("1e400-rate", lambda t, r: _raw(t, '{"training": {"learning_rate": 1e400}}'), "training.learning_rate: must be a finite number"),
    Case("nan-weight-decay", lambda t, r: _raw(t, '{"training": {"weight_decay": NaN}}'), "training.weight_decay: must be a finite number"),
    Case("epochs-1e30", lambda t, r: _raw(t, '{"training": {"epochs": 1000000000000000000000000000000}}'), "training.epochs: must be at most 100,000"),
    Case("batch-too-large", lambda t, r: _train(t, training={"global_batch_size": 10**7}), "training.global_batch_size: must be at most"),
    Case("image-size-too-large", lambda t, r: _train(t, dataset={"image_size": [5000, 5000]}), "dataset.image_size"),
    Case("cpu-devices-1000", lambda t, r: _train(t, runtime={"cpu_devices": 1000}), "runtime.cpu_devices: must be in [1, 64]"),
    Case("unknown-key", lambda t, r: _train(t, training={"batch": 3}), "training.batch: unknown key"),
    Case("wrong-type", lambda t, r: _train(t, training={"epochs": "five"}), "training.epochs: must be an integer"),
    Case("device-does-not-exist", lambda t, r: _train(t, strategy={"devices": ["CPU:0", "CPU:7"]}), "strategy.devices: CPU:7 does not exist"),
    Case("pack-on-mirrored", lambda t, r: _train(t, strategy={"bytes_per_pack": 65536}),
         "strategy.bytes_per_pack: only multi_worker_mirrored packs its all-reduce"),
    Case("micro-batches-too-many", lambda t, r: _train(t, training={"accumulation_steps": 64}),
         "training.accumulation_steps: 64 micro-batches do not fit the 32 examples per replica"),
    Case("model-not-keras", lambda t, r: _train(t, model={"name": "keras_file", "path": str(t / "m.h5")}), "model.path: must be a .keras file"),
    Case("keras-file-missing", lambda t, r: _train(t, model={"name": "keras_file", "path": str(t / "gone.keras")}), "does not exist"),
    # ---- dataset files ------------------------------------------------------------------
    Case("npz-missing", lambda t, r: _train(t, dataset={"name": "npz", "path": str(t / "none.npz")}), "none.npz"),
    Case("npz-not-a-zip", lambda t, r: ((t / "data.npz").write_bytes(b"PK\x03\x04broken"),
                                        _train(t, dataset={"name": "npz", "path": str(t / "data.npz")}))[1], "data.npz"),
    Case("npz-mismatched-lengths", lambda t, r: _npz(t, y_train=np.arange(39) % 4), "40 images but y_train has 39 labels"),
    Case("npz-label-out-of-range", lambda t, r: _npz(t, y_train=np.full(40, 10**9)), "labels go up to"),
    Case("npz-negative-label", lambda t, r: _npz(t, y_train=np.full(40, -1)), "data.npz"),
    Case("npz-wrong-rank", lambda t, r: _npz(t, x_train=np.zeros((40,), np.uint8)), "data.npz"),
    Case("npz-wrong-dtype", lambda t, r: _npz(t, x_train=np.array(["a"] * 40)), "data.npz"),
    Case("npz-missing-key", lambda t, r: _npz(t, y_test=None), "y_test"),
    Case("idx-wrong-magic", lambda t, r: _idx(t, lambda f: f.update({"train-images-idx3-ubyte": b"\x12\x34" + f["train-images-idx3-ubyte"][2:]})), "train-images-idx3-ubyte"),
    Case("idx-truncated", lambda t, r: _idx(t, lambda f: f.update({"train-images-idx3-ubyte": f["train-images-idx3-ubyte"][:100]})), "train-images-idx3-ubyte"),
    Case("idx-count-mismatch", lambda t, r: _idx(t, lambda f: f.update({"train-labels-idx1-ubyte": struct.pack(">II", 0x801, 29) + bytes(29)})), "idx"),
    Case("idx-gz-corrupt", lambda t, r: _idx(t, lambda f: (f.pop("t10k-labels-idx1-ubyte"), f.update({"t10k-labels-idx1-ubyte.gz": gzip.compress(b"x" * 50)[:20]}))), "t10k-labels-idx1-ubyte"),
    Case("folder-empty", lambda t, r: _folder(t, {}), "the folder is empty"),
    Case("folder-one-class", lambda t, r: _folder(t, {"only": GOOD * 2}), "has one class folder (only)"),
    Case("folder-class-without-images", lambda t, r: _folder(t, {"a": GOOD, "b": []}), "class folder has no images"),
    Case("folder-all-corrupt", lambda t, r: _folder(t, {"a": GOOD, "b": [b"\x89PNG\r\n\x1a\nbroken"] * 3}), "none of the class's images could be decoded"),
    Case("folder-symlink-loop", lambda t, r: _folder(t, {"a": GOOD, "b": []}, _symlink_loop), "images"),
    Case("folder-decompression-bomb", lambda t, r: _folder(t, {"a": GOOD, "b": [_png(60000, 60000)] * 2}), "none of the class's images could be decoded (2 too large to decode safely)"),
    # ---- model files --------------------------------------------------------------------
    Case("keras-not-a-keras-file", lambda t, r: ((t / "junk.keras").write_bytes(b"not a zip"),
                                                 _train(t, model={"name": "keras_file", "path": str(t / "junk.keras")}))[1],
         "junk.keras is not a Keras model file (a .keras file is a zip archive; this one is text)"),
    Case("keras-wrong-input", _wrong_input_keras, "model.path"),
    Case("keras-unsafe-lambda", _lambda_keras, "model.path: cannot load"),
    # ---- run directories ----------------------------------------------------------------
    Case("run-missing-config", lambda t, r: ["resume", str(_run_copy(t, r, lambda d: (d / "config.json").unlink()))],
         "is not a run directory (no config.json)", needs_run=True),
    Case("run-not-a-folder", lambda t, r: ["evaluate", str(t / "nowhere")], "is not a run directory"),
    Case("run-corrupt-config", lambda t, r: ["resume", str(_run_copy(t, r, lambda d: (d / "config.json").write_text("{")))],
         "config: not valid JSON", needs_run=True),
    Case("run-already-completed", lambda t, r: ["resume", str(_run_copy(t, r, lambda d: None))], "has already completed", needs_run=True),
    Case("run-corrupt-events-completed", lambda t, r: ["resume", str(_run_copy(t, r, lambda d: (d / "events.jsonl").open("ab").write(b"\x00\xff{torn")))],
         "has already completed", needs_run=True),
    Case("run-damaged-checkpoints", lambda t, r: ["evaluate", str(_run_copy(t, r, _damage_all_checkpoints))], "no usable checkpoint", needs_run=True),
    Case("run-no-model-no-checkpoint", lambda t, r: ["evaluate", str(_run_copy(t, r, lambda d: ((d / "model.keras").unlink(), shutil.rmtree(d / "checkpoints"))))],
         "has neither model.keras nor a checkpoint", needs_run=True),
    Case("run-damaged-model", lambda t, r: ["evaluate", str(_run_copy(t, r, lambda d: (d / "model.keras").write_bytes(b"PK junk")))],
         "model.keras is not a Keras model file", needs_run=True),
    Case("resume-set-model-key", lambda t, r: ["resume", str(_run_copy(t, r, lambda d: None)), "--set", "model.name=mlp"], "--set model.name: cannot change on resume", needs_run=True),
    Case("resume-set-bad-value", lambda t, r: ["resume", str(_run_copy(t, r, lambda d: None)), "--set", "training.learning_rate=-1"], "training.learning_rate: must be > 0", needs_run=True),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory, request):
    needs_run = any(c.needs_run for c in CASES)
    trained = request.getfixturevalue("trained_run") if needs_run else None
    base = tmp_path_factory.mktemp("bad-input")
    prepared = []
    for case in CASES:
        tmp = base / case.id
        tmp.mkdir()
        argv = case.build(tmp, trained)
        run = Path(argv[1]) if argv[0] in ("resume", "evaluate") else None
        before = rundir.read_run(run).status if run is not None and (run / "config.json").is_file() else None
        prepared.append((case, tmp, argv, run, before))

    def one(item):
        case, tmp, argv, run, before = item
        return case.id, (run_cli(*argv, "--events", "jsonl", timeout=240), tmp, run, before)

    with ThreadPoolExecutor(max_workers=2) as pool:  # two cores, shared
        return dict(pool.map(one, prepared))


def test_the_matrix_is_large():
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.slow  # about a minute of CPU (two at a time): 14 cases start TensorFlow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_exits_2_with_one_line(results, case):
    proc, tmp, run, before = results[case.id]
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1, lines
    assert lines[0].startswith("replica-studio ") and case.expect in lines[0], lines[0]
    events = [json.loads(line) for line in proc.stdout.splitlines()]  # stdout holds only events
    assert [e["type"] for e in events][-2:] == ["error", "run_finished"]
    runs = tmp / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "a refused run left a directory behind"
    if before is not None:
        assert rundir.read_run(run).status == before, "a refused command changed the run's status"
    assert not list(tmp.rglob("*.partial*")), "a temporary file was left"
