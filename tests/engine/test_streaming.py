"""Streamed input in the engine (issue 10): each format trains from files the test writes,
a resumed streamed run matches an uninterrupted one step for step, bad shards exit 2 naming
the file, a decompression bomb in a streamed folder is skipped and counted."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from engine_helpers import config_dict, run_cli, run_in_process

from gui_app.core import rundir
from gui_app.engine.run.control import Control

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from stream_files import bomb_png, example, indexed_image, png, write_image_folder, write_tfrecords

TRAIN = {"epochs": 2, "global_batch_size": 16, "seed": 3, "steps_per_call": 3}
MIRRORED = {"name": "mirrored", "devices": ["CPU:0", "CPU:1"]}


def _stream_config(dataset: dict, **training) -> dict:
    return config_dict(dataset={"image_size": [8, 8], "color_mode": "grayscale", "loading": "stream", **dataset},
                       model={"name": "mlp"}, strategy=MIRRORED, training={**TRAIN, **training})


def _losses(tap) -> dict[int, float]:
    return {e["step"]: e["loss"] for e in tap.of("step")}


@pytest.mark.parametrize("cache", ["none", "memory", "file"])
def test_streamed_tfrecord_resume_matches_an_uninterrupted_run(tmp_path, write_config, cache):
    write_tfrecords(tmp_path / "shards", 300, shards=4)
    config = write_config(_stream_config({"name": "tfrecord", "path": str(tmp_path / "shards"), "cache": cache,
                                          "shuffle_buffer": 64}))
    code, full = run_in_process("train", config, tmp_path / "a")
    assert code == 0, full.of("error")
    started = full.of("run_started")[0]
    assert started["dataset"]["streamed"] is True
    total = started["total_steps"]
    assert total == 2 * (started["dataset"]["train_examples"] // 16)
    steps = full.of("step")
    assert all(e["input_wait"] is not None and e["input_wait"] >= 0 for e in steps)
    assert full.of("eval")[0]["examples"] == started["dataset"]["test_examples"]

    control = Control()

    def stop_when(event):  # stop in the middle of the first epoch, off a step-group boundary
        if event["type"] == "step" and event["step"] >= 4:
            control.command("stop")

    code, first = run_in_process("train", config, tmp_path / "b", on_event=stop_when, control=control)
    assert code == 0 and first.events[-1]["status"] == "stopped"
    stopped_at = first.events[-1]["step"]
    assert 0 < stopped_at < total // 2
    run = rundir.list_runs(tmp_path / "b")[0]
    code, second = run_in_process("resume", run.path)
    assert code == 0 and second.events[-1]["status"] == "completed"
    expected, resumed = _losses(full), _losses(second)
    assert sorted(resumed) == list(range(stopped_at + 1, total + 1))
    for step in resumed:
        assert resumed[step] == pytest.approx(expected[step], rel=1e-5, abs=1e-6)
    assert (run.path / rundir.MISCLASSIFIED_FILE).is_file()
    if cache == "file":  # the decoded training cache lives in the run's data folder
        assert list((run.path / "data").glob("train-cache-0-of-1*"))


def test_streamed_image_folder_skips_and_counts_a_decompression_bomb(tmp_path, write_config):
    write_image_folder(tmp_path / "imgs", 120)
    (tmp_path / "imgs" / "c1" / "bomb.png").write_bytes(bomb_png(40000, 40000))  # 1.6 gigapixels
    config = write_config(_stream_config({"name": "image_folder", "path": str(tmp_path / "imgs")}, epochs=1))
    code, tap = run_in_process("train", config, tmp_path / "runs")
    assert code == 0, tap.of("error")
    started = tap.of("run_started")[0]
    assert started["dataset"]["skipped_images"] == 1
    d = started["dataset"]
    assert d["train_examples"] + d["validation_examples"] + d["test_examples"] == 120
    assert any("bomb.png" in w["message"] and "pixels" in w["message"] for w in tap.of("warning"))


def _bad_shards(kind: str, folder: Path) -> Path:
    paths = write_tfrecords(folder, 60, shards=2)
    if kind == "truncated":
        data = paths[1].read_bytes()
        paths[1].write_bytes(data[: len(data) - 37])
        return paths[1]
    if kind in ("no_image", "label"):
        import tensorflow as tf

        (folder / "labels.txt").write_text("a\nb\nc\n")
        bad = folder / "train-00002-of-00003.tfrecord"
        with tf.io.TFRecordWriter(str(bad)) as w:
            w.write(example(png(indexed_image(1)), 1))
            w.write(example(None, 1) if kind == "no_image" else example(png(indexed_image(2)), 7))
        return bad
    raise AssertionError(kind)


@pytest.mark.parametrize("kind, needle", [("truncated", "truncated"), ("no_image", "image/encoded"),
                                          ("label", "out of range"), ("empty_glob", "matches no TFRecord")])
def test_bad_shards_exit_2_with_one_line_naming_the_file(tmp_path, write_config, kind, needle):
    if kind == "empty_glob":
        path, named = str(tmp_path / "nothing-*.tfrecord"), str(tmp_path / "nothing-*.tfrecord")
    else:
        named = str(_bad_shards(kind, tmp_path / "shards"))
        path = str(tmp_path / "shards")
    config = write_config(_stream_config({"name": "tfrecord", "path": path}))
    result = run_cli("train", str(config), "--runs-dir", str(tmp_path / "runs"), "--events", "none")
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("replica-studio train:")]
    assert len(lines) == 1 and named in lines[0] and needle in lines[0], result.stderr


def test_prepare_cli_writes_shards_that_train(tmp_path, write_config):
    import json

    source = write_config(config_dict(dataset={"name": "digits"}), "digits.json")
    result = run_cli("prepare", str(source), "--output", str(tmp_path / "shards"), "--shards", "3", "--json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[-1]["type"] == "prepared" and lines[-1]["counts"]["train"] + lines[-1]["counts"]["test"] == 1797
    assert all(line["type"] == "progress" for line in lines[:-1]) and lines[-1]["images_per_sec"] > 0
    again = run_cli("prepare", str(source), "--output", str(tmp_path / "shards"))
    assert again.returncode == 2 and "not an empty folder" in again.stderr

    config = write_config(config_dict(dataset={"name": "tfrecord", "path": str(tmp_path / "shards"),
                                               "image_size": [8, 8], "color_mode": "grayscale", "loading": "stream"},
                                      training={"epochs": 2, "global_batch_size": 64, "seed": 1}))
    code, tap = run_in_process("train", config, tmp_path / "runs")
    assert code == 0, tap.of("error")
    assert tap.of("run_started")[0]["dataset"]["test_examples"] == lines[-1]["counts"]["test"]
    assert tap.of("eval")[0]["accuracy"] > 0.8  # digits after two epochs of mnist_cnn


def test_tfds_dataset_trains_in_the_engine(tmp_path, write_config):
    pytest.importorskip("tensorflow_datasets", reason="tensorflow-datasets (the [tfds] extra) is not installed")
    import subprocess

    from gui_app.identity import app_env

    builder = Path(__file__).with_name("tfds_builder.py")
    subprocess.run([sys.executable, str(builder), str(tmp_path / "tfds")], check=True, env=app_env(),
                   capture_output=True, timeout=300)
    # The engine process never saw the builder's code: TFDS reads the prepared files alone.
    config = write_config(_stream_config({"name": "tfds", "tfds_name": "tiny_indexed",
                                          "data_dir": str(tmp_path / "tfds")}, epochs=1))
    result = run_cli("train", str(config), "--runs-dir", str(tmp_path / "runs"), "--events", "jsonl")
    assert result.returncode == 0, result.stderr[-2000:]
    import json

    events = [json.loads(line) for line in result.stdout.splitlines()]
    started = [e for e in events if e["type"] == "run_started"][0]
    assert started["dataset"]["class_names"] == ["a", "b", "c"] and started["dataset"]["test_examples"] == 60
    assert [e for e in events if e["type"] == "eval"][0]["examples"] == 60


def test_inspect_previews_a_streamed_set_without_decoding_it_whole(tmp_path, write_config):
    import json

    import numpy as np

    write_tfrecords(tmp_path / "shards", 600, shards=3)
    config = write_config(_stream_config({"name": "tfrecord", "path": str(tmp_path / "shards")}))
    result = run_cli("inspect", str(config), "--json", "--samples", str(tmp_path / "samples.npz"))
    assert result.returncode == 0, result.stderr
    dataset = json.loads(result.stdout)["dataset"]
    assert dataset["streamed"] is True and dataset["train_examples"] + dataset["test_examples"] == 600
    assert dataset["class_names"] == ["class0", "class1", "class2"]
    samples = np.load(tmp_path / "samples.npz")
    assert samples["x"].shape[1:] == (8, 8, 1) and set(samples["y"].tolist()) == {0, 1, 2}
