"""Exports of a run trained under MirroredStrategy on two CPU replicas: every format loads in
its own runtime and passes its parity check, the model card says what the file is, writes are
atomic, and predict reads image files the way training read them."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from gui_app.core.config import RunConfig
from gui_app.core.formats import ExportFormat, get_format
from gui_app.engine.export import (
    FORMATS,
    ConversionError,
    ExportCancelled,
    ExportError,
    default_file_name,
    export_run,
    load_predictor,
    read_card,
)
from gui_app.engine.export import exporter as exporter_module
from gui_app.engine.export.atomic import AtomicDestination
from gui_app.engine.export.parity import compare
from gui_app.engine.export.runtimes import open_runtime


@pytest.fixture(scope="module")
def all_exports(trained_run, tmp_path_factory):
    """Every format exported once into one folder: {format: ExportResult}."""
    folder = tmp_path_factory.mktemp("exports")
    return {name: export_run(trained_run, name, folder / default_file_name(fmt, "digits"))
            for name, fmt in FORMATS.items()}


def _eval(run: Path) -> dict:
    return json.loads((run / "eval.json").read_text())


def test_the_run_was_trained_on_two_replicas(trained_run):
    from gui_app.core.events import RunStarted
    from gui_app.core.rundir import read_events

    config = RunConfig.load(trained_run / "config.json")
    assert config.strategy.name == "mirrored" and config.strategy.devices == ("CPU:0", "CPU:1")
    started = next(e for e in read_events(trained_run) if isinstance(e, RunStarted))
    assert started.num_replicas == 2
    assert _eval(trained_run)["accuracy"] > 0.8


def test_onnx_keeps_captured_constants_inside_the_graph(tmp_path):
    """A Normalization layer's mean and variance are captured constants, which Keras's own
    ONNX export (tf2onnx.from_function) turns into extra graph inputs."""
    import keras

    from gui_app.engine.export.probability import probability_model
    from gui_app.engine.export.writers import write_export

    inputs = keras.Input((4, 4, 1))
    x = keras.layers.Normalization(mean=[0.3], variance=[0.04])(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(x)))
    wrapped = probability_model(model, (4, 4, 1))
    images = np.random.default_rng(0).random((5, 4, 4, 1), dtype=np.float32)
    reference = wrapped.predict(images, verbose=0)
    write_export(FORMATS["onnx"], wrapped, tmp_path / "m.onnx", (4, 4, 1))
    runtime = open_runtime(tmp_path / "m.onnx")  # refuses files with more than one input
    np.testing.assert_allclose(runtime(images), reference, atol=1e-6)


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_format_passes_its_parity_check(all_exports, name):
    result, fmt = all_exports[name], FORMATS[name]
    assert result.written and result.passed and result.path.exists()
    parity = result.parity
    assert parity.examples == 256
    if name == "tflite-fp16":
        assert parity.max_abs_diff <= 1e-2
    elif fmt.max_abs_diff is not None:
        assert parity.max_abs_diff <= 1e-5
    else:
        assert parity.top1_agreement >= 0.98
    assert parity.accuracy > 0.8 and parity.reference_accuracy > 0.8
    # Nothing else in the folder: no temporary left behind by any export.
    names = {p.name for p in result.path.parent.iterdir()}
    assert not [n for n in names if ".partial" in n or n.endswith(".old")]


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_file_loads_in_its_own_runtime_with_a_dynamic_batch(all_exports, trained_run, name):
    from gui_app.engine.datasets import load_dataset

    runtime = open_runtime(all_exports[name].path)
    assert runtime.runtime == FORMATS[name].runtime
    assert runtime.input_shape == (8, 8, 1)
    x = load_dataset(RunConfig.load(trained_run / "config.json").dataset).x_test[:3] / np.float32(255)
    for batch in (x[:1], x):
        probabilities = runtime(batch)
        assert probabilities.shape == (len(batch), 10)
        tolerance = 0.02 if runtime.output_quantization else 1e-5  # int8 probabilities are k/256
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=tolerance)


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_model_card_matches(all_exports, trained_run, name):
    import keras
    import tensorflow as tf

    result = all_exports[name]
    card = read_card(result.path)
    evaluation = _eval(trained_run)
    assert result.card_path == result.path.with_name(result.path.name + ".json")
    assert card["format"] == name and card["file"] == result.path.name
    assert card["dataset"] == "digits"
    assert card["class_names"] == evaluation["class_names"]
    assert card["input"]["shape"] == [None, 8, 8, 1] and card["input"]["name"] == "image"
    assert card["input"]["dtype"] == ("int8" if name == "tflite-int8-full" else "float32")
    assert card["output"]["shape"] == [None, 10] and card["output"]["name"] == "probabilities"
    assert card["preprocessing"]["scale"] == pytest.approx(1 / 255) and "255" in card["preprocessing"]["description"]
    assert card["run_config"] == RunConfig.load(trained_run / "config.json").to_dict()
    assert card["test_accuracy"] == evaluation["accuracy"]
    assert card["versions"]["tensorflow"] == tf.__version__ and card["versions"]["keras"] == keras.__version__
    assert card["parity"] == json.loads(json.dumps(result.parity.to_dict()))
    assert card["size_bytes"] == result.size_bytes > 0
    signatures = card["signatures"]
    if name == "savedmodel" or name.startswith("tflite"):
        assert signatures["serve"] == {"inputs": ["image"], "outputs": ["probabilities"]}
    if name == "onnx":
        assert signatures["onnx"]["batch_dimension"] == "batch"


def test_full_integer_file_takes_pixels_minus_128(all_exports):
    card = read_card(all_exports["tflite-int8-full"].path)
    assert card["input"]["quantization"]["zero_point"] == -128
    assert card["input"]["quantization"]["scale"] == pytest.approx(1 / 255)
    assert "uint8 pixel - 128" in card["preprocessing"]["description"]


def test_savedmodel_serves_probabilities_under_serve(all_exports):
    import tensorflow as tf

    loaded = tf.saved_model.load(str(all_exports["savedmodel"].path))
    assert {"serve", "serving_default"} <= set(loaded.signatures)
    serve = loaded.signatures["serve"]
    (spec,) = serve.structured_input_signature[1].values()
    assert spec.name == "image" and spec.shape.as_list() == [None, 8, 8, 1]
    out = serve(image=tf.zeros((2, 8, 8, 1)))["probabilities"].numpy()
    np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-6)


# ---- the check judges -----------------------------------------------------------------------

def test_compare_fails_a_float_file_just_over_the_threshold():
    reference = np.full((4, 2), 0.5)
    assert compare(FORMATS["tflite"], "x", reference + 0.9e-5, reference).passed
    report = compare(FORMATS["tflite"], "x", reference + [2e-5, -2e-5], reference)
    assert not report.passed and report.max_abs_diff == pytest.approx(2e-5)


def test_compare_judges_int8_files_by_top1_agreement():
    reference = np.tile([[0.9, 0.1]], (100, 1))
    flipped = reference.copy()
    flipped[:3] = [0.1, 0.9]  # 97 % agreement
    labels = np.zeros(100, int)
    report = compare(FORMATS["tflite-int8"], "x", flipped, reference, labels)
    assert not report.passed and report.top1_agreement == pytest.approx(0.97)
    assert report.accuracy == pytest.approx(0.97) and report.reference_accuracy == 1.0
    flipped[2] = reference[2]  # 98 %: passes
    assert compare(FORMATS["tflite-int8"], "x", flipped, reference).passed


# ---- atomic writes and bad input ------------------------------------------------------------

def test_a_file_failing_its_check_is_not_written(trained_run, tmp_path, monkeypatch):
    strict = dataclasses.replace(FORMATS["tflite-fp16"], max_abs_diff=1e-9)
    monkeypatch.setattr(exporter_module, "get_format", lambda name: strict)
    result = export_run(trained_run, "tflite-fp16", tmp_path / "m.tflite", check=32)
    assert not result.passed and not result.written
    assert list(tmp_path.iterdir()) == []
    kept = export_run(trained_run, "tflite-fp16", tmp_path / "m.tflite", check=32, keep_failed=True)
    assert kept.written and not kept.passed
    assert read_card(kept.path)["parity"]["passed"] is False


def test_a_failing_export_leaves_nothing(trained_run, tmp_path, monkeypatch):
    def half_write(fmt, model, path, input_shape, representative=None):
        path.write_bytes(b"half a flatbuffer")
        raise ConversionError("tflite: the TensorFlow Lite converter failed: boom")

    (tmp_path / "m.tflite").write_bytes(b"the previous export")
    monkeypatch.setattr(exporter_module, "write_export", half_write)
    with pytest.raises(ConversionError, match="boom"):
        export_run(trained_run, "tflite", tmp_path / "m.tflite", check=8)
    assert [p.name for p in tmp_path.iterdir()] == ["m.tflite"]
    assert (tmp_path / "m.tflite").read_bytes() == b"the previous export"


def test_cancel_during_calibration_leaves_nothing(trained_run, tmp_path):
    stages = []

    def cancel() -> bool:  # once the converter has started
        return any(s.startswith("Writing") for s in stages)

    with pytest.raises(ExportCancelled):
        export_run(trained_run, "tflite-int8-full", tmp_path / "m.tflite", check=8,
                   progress=lambda fraction, message: stages.append(message), cancel=cancel)
    assert stages[-1].startswith("Writing")  # it stopped inside the converter's calibration
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("folder", ["/sys", "read-only"])
def test_an_unwritable_destination_is_a_clear_error(trained_run, tmp_path, folder):
    if folder == "read-only":
        if sys.platform == "win32" or os.geteuid() == 0:
            pytest.skip("root (or Windows) writes into read-only folders")
        target = tmp_path / "locked"
        target.mkdir(mode=0o500)
    else:
        target = Path(folder)
        if not target.is_dir():
            pytest.skip("no /sys here")
    with pytest.raises(ExportError, match=r"cannot write there \(Permission denied\)") as caught:
        export_run(trained_run, "tflite", target / "m.tflite")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("args, message", [
    (("tflite", "m.onnx"), "tflite exports are .tflite files"),
    (("savedmodel", "m.keras"), "a SavedModel is a folder"),
    (("pytorch", "m.pt"), "format: must be one of keras, savedmodel"),
    (("keras", "nowhere/m.keras"), "no such folder"),
])
def test_bad_export_arguments(trained_run, tmp_path, args, message):
    fmt, output = args
    with pytest.raises(ExportError, match=message):
        export_run(trained_run, fmt, tmp_path / output)
    assert not any(tmp_path.iterdir())


def test_a_run_without_a_model_or_config_is_refused(trained_run, tmp_path):
    shutil.copy(trained_run / "config.json", tmp_path / "config.json")
    with pytest.raises(ExportError, match=r"no trained model \(model.keras\)"):
        export_run(tmp_path, "keras", tmp_path / "m.keras")
    with pytest.raises(ExportError, match="not a run folder"):
        export_run(tmp_path / "missing", "keras", tmp_path / "m.keras")
    with pytest.raises(ExportError, match="check: must be >= 0"):
        export_run(trained_run, "keras", tmp_path / "m.keras", check=-1)


def test_atomic_destination_replaces_a_savedmodel_but_never_another_folder(tmp_path):
    old = tmp_path / "model_savedmodel"
    old.mkdir()
    (old / "saved_model.pb").write_text("old")
    with AtomicDestination(old, directory=True) as out:
        (out.temp / "saved_model.pb").write_text("new")
        out.commit()
    assert (old / "saved_model.pb").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model_savedmodel"]
    documents = tmp_path / "documents"
    documents.mkdir()
    with pytest.raises(ExportError, match="not a SavedModel folder"):
        AtomicDestination(documents, directory=True).__enter__()


def test_atomic_destination_gives_exports_ordinary_permissions(tmp_path):
    with AtomicDestination(tmp_path / "m.onnx") as out:
        out.temp.write_bytes(b"x")
        out.commit()
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "m.onnx").stat().st_mode & 0o777 == 0o666 & ~umask


# ---- predict --------------------------------------------------------------------------------

def _write_png(path: Path, pixels: np.ndarray) -> Path:
    import tensorflow as tf

    path.write_bytes(tf.io.encode_png(pixels).numpy())
    return path


@pytest.fixture(scope="module")
def digit_pngs(trained_run, tmp_path_factory):
    """Three test digits: exact 8x8 grey, 32x32 RGB and 24x24 RGBA; and the raw test images."""
    from gui_app.engine.datasets import load_dataset

    data = load_dataset(RunConfig.load(trained_run / "config.json").dataset)
    folder = tmp_path_factory.mktemp("pngs")
    raw = data.x_test[:3]
    exact = _write_png(folder / "exact.png", raw[0])
    rgb = _write_png(folder / "rgb.png", np.repeat(np.repeat(np.repeat(raw[1], 4, 0), 4, 1), 3, 2))
    rgba = np.concatenate([np.repeat(np.repeat(np.repeat(raw[2], 3, 0), 3, 1), 3, 2),
                           np.full((24, 24, 1), 255, np.uint8)], axis=2)
    return [exact, rgb, _write_png(folder / "rgba.png", rgba)], raw


@pytest.mark.parametrize("name", ["run", "keras", "savedmodel", "tflite-int8-full", "onnx"])
def test_predict_returns_probabilities_for_image_files(all_exports, trained_run, digit_pngs, name):
    paths, raw = digit_pngs
    predictor = load_predictor(trained_run if name == "run" else all_exports[name].path)
    assert predictor.warnings == [] and predictor.class_names == [str(i) for i in range(10)]
    predictions = predictor.predict_files(paths)
    assert len(predictions) == 3
    for prediction in predictions:
        assert prediction.image.shape == (8, 8, 1) and prediction.image.dtype == np.uint8
        assert prediction.probabilities.shape == (10,)
        assert prediction.probabilities.sum() == pytest.approx(1.0, abs=1e-5)
        top = prediction.top(5)
        assert len(top) == 5 and [p for _, _, p in top] == sorted((p for _, _, p in top), reverse=True)
    # An 8x8 grey PNG is seen pixel for pixel as the dataset image it came from.
    np.testing.assert_array_equal(predictions[0].image, raw[0])
    np.testing.assert_allclose(predictions[0].probabilities, predictor.predict(raw[:1])[0], atol=1e-6)


def test_predict_without_a_model_card_numbers_the_classes(all_exports, tmp_path, digit_pngs):
    lone = shutil.copy(all_exports["onnx"].path, tmp_path / "lone.onnx")
    predictor = load_predictor(lone)
    assert predictor.class_names == [str(i) for i in range(10)]
    assert "no model card" in predictor.warnings[0]
    assert predictor.predict_files(digit_pngs[0][:1])[0].probabilities.sum() == pytest.approx(1.0, abs=1e-5)


def test_predict_names_a_file_that_is_not_an_image(all_exports, tmp_path):
    predictor = load_predictor(all_exports["tflite"].path)
    notes = tmp_path / "notes.png"
    notes.write_text("not really a png")
    with pytest.raises(ExportError, match=r"notes.png: not a PNG, JPEG, BMP or GIF image"):
        predictor.predict_files([notes])


def test_test_samples_come_from_the_models_dataset(all_exports):
    predictor = load_predictor(all_exports["tflite-int8"].path)
    images, labels = predictor.test_samples(5, seed=0)
    assert images.shape == (5, 8, 8, 1) and labels.shape == (5,)
    predictions = predictor.predict_images(images, [f"test image {i}" for i in range(5)], labels)
    assert sum(p.top(1)[0][0] == p.label for p in predictions) >= 4


@pytest.mark.parametrize("path, message", [
    ("missing.tflite", "no such file or folder"),
    ("model.pt", "not a run folder, .keras file"),
])
def test_load_predictor_refuses_what_it_cannot_read(tmp_path, path, message):
    if path == "model.pt":
        (tmp_path / path).write_bytes(b"")
    with pytest.raises(ExportError, match=message):
        load_predictor(tmp_path / path)


def test_get_format_rejects_unknown_names():
    assert isinstance(get_format("onnx"), ExportFormat)
    with pytest.raises(ExportError, match="format: must be one of"):
        get_format("coreml")


def test_savedmodel_is_opened_only_with_a_matching_card(all_exports, tmp_path):
    """Loading a SavedModel runs its graph: ours (the card's hash matches) open; a copy without
    its card, or with a changed file, is refused unless the caller says it trusts it."""
    from gui_app.engine.export.predict import UNVERIFIED_SAVEDMODEL_FLAG

    ours = all_exports["savedmodel"].path
    assert load_predictor(ours).kind == "savedmodel"  # the export wrote the hash into the card
    bare = tmp_path / "elsewhere"
    shutil.copytree(ours, bare)
    with pytest.raises(ExportError, match="no Replica Studio model card") as info:
        load_predictor(bare)
    assert UNVERIFIED_SAVEDMODEL_FLAG in str(info.value) and "\n" not in str(info.value)
    assert load_predictor(bare, allow_unverified_savedmodel=True).kind == "savedmodel"
    changed = tmp_path / "changed"
    shutil.copytree(ours, changed)
    shutil.copy(ours.with_name(ours.name + ".json"), changed.with_name("changed.json"))
    (changed / "fingerprint.pb").write_bytes(b"swapped")
    with pytest.raises(ExportError, match="do not match the hash"):
        load_predictor(changed)


def test_keras_file_with_a_lambda_layer_is_refused_in_one_line(tmp_path):
    import keras

    inputs = keras.Input((8, 8, 1))
    outputs = keras.layers.Dense(10)(keras.layers.Flatten()(keras.layers.Lambda(lambda x: x * 2.0)(inputs)))
    keras.Model(inputs, outputs).save(tmp_path / "lambda.keras")
    with pytest.raises(ExportError) as info:
        load_predictor(tmp_path / "lambda.keras")
    message = str(info.value)
    assert "cannot load the Keras model" in message and "Lambda" in message and "\n" not in message


def test_the_parity_accuracy_says_on_how_many_images_it_was_measured():
    """96.88 % on 256 images stood beside the run's 95.82 % over its whole test set."""
    from gui_app.core.export_result import ParityReport

    report = ParityReport(format="tflite", runtime="litert", examples=256, max_abs_diff=1e-6, mean_abs_diff=1e-7,
                          top1_agreement=1.0, accuracy=0.96875, reference_accuracy=0.96875,
                          criterion="max abs diff <= 1e-05", passed=True)
    assert report.accuracy_text() == "96.88% on these 256 images (trained model 96.88% on the same images)"
    assert "accuracy 96.88% on these 256 images" in report.summary()
    assert dataclasses.replace(report, accuracy=None).accuracy_text() is None
