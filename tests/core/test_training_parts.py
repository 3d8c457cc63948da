"""Pieces of the training side: schedules, metrics, strategies, models, events, control."""
from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest

from gui_app.core.config import ModelConfig, StrategyConfig, TrainingConfig


def test_schedules():
    from gui_app.engine.training.optim import make_schedule

    steps = np.array([0, 9, 10, 55, 100], np.float32)
    constant = np.asarray(make_schedule(TrainingConfig(learning_rate=0.1), 10, 100)(steps))
    assert np.allclose(constant, 0.1)
    warm = np.asarray(make_schedule(TrainingConfig(learning_rate=0.1, warmup_steps=10), 10, 100)(steps))
    assert np.allclose(warm[:2], [0.01, 0.1]) and np.allclose(warm[2:], 0.1)
    cosine = np.asarray(make_schedule(TrainingConfig(learning_rate=0.1, schedule="cosine"), 10, 100)(steps))
    assert cosine[0] == pytest.approx(0.1) and cosine[3] == pytest.approx(0.1 * 0.5 * (1 + math.cos(math.pi * .55)))
    assert cosine[4] == pytest.approx(0.0, abs=1e-7)
    step = make_schedule(TrainingConfig(learning_rate=0.1, schedule="step", step_decay_epochs=2,
                                        step_decay_rate=0.5), 10, 100)
    assert np.allclose(np.asarray(step(np.array([19, 20, 40], np.float32))), [0.1, 0.05, 0.025])


def test_per_class_metrics():
    from gui_app.core.metrics import per_class_metrics

    cm = np.array([[8, 2], [1, 9]])
    a, b = per_class_metrics(cm, ["a", "b"])
    assert a["precision"] == pytest.approx(8 / 9) and a["recall"] == pytest.approx(0.8)
    assert a["f1"] == pytest.approx(2 * (8 / 9) * 0.8 / (8 / 9 + 0.8)) and a["support"] == 10
    assert b["name"] == "b" and b["recall"] == pytest.approx(0.9)
    empty = per_class_metrics(np.zeros((2, 2)), ["a", "b"])
    assert empty[0]["precision"] == 0.0 and empty[0]["f1"] == 0.0


def test_strategies_on_two_cpus():
    from gui_app.engine.training.strategies import build_strategy

    mirrored = build_strategy(StrategyConfig(devices=("CPU:0", "CPU:1")))
    assert mirrored.num_replicas == 2 and mirrored.cross_device_ops == "reduce_to_one"
    assert mirrored.devices[1].endswith("CPU:1")
    fallback = build_strategy(StrategyConfig(devices=("CPU:0", "CPU:1"), cross_device_ops="nccl"))
    assert fallback.cross_device_ops == "reduce_to_one"
    assert any("nccl is not available" in w for w in fallback.warnings)
    one = build_strategy(StrategyConfig(name="one_device", device="CPU:1"))
    assert one.num_replicas == 1 and one.devices[0].endswith("CPU:1")
    assert build_strategy(StrategyConfig(name="default")).num_replicas == 1


@pytest.mark.parametrize("name, shape, params", [
    ("mnist_cnn", (28, 28, 1), 320 + 13 * 13 * 32 * 128 + 128 + 1290),
    ("cifar_cnn", (32, 32, 3), 896 + 18496 + 36928 + 1024 * 64 + 64 + 650),
    ("mlp", (8, 8, 1), 64 * 256 + 256 + 256 * 128 + 128 + 1290),
])
def test_tutorial_models_have_the_tutorial_shapes(name, shape, params):
    from gui_app.engine.training.models import build_model, describe

    model = build_model(ModelConfig(name), shape, 10)
    assert describe(model)["trainable_parameters"] == params
    assert model.output_shape == (None, 10)


def test_resnet20_and_mobilenet():
    from gui_app.engine.training.models import ModelError, build_model, describe

    resnet = build_model(ModelConfig("resnet20"), (32, 32, 3), 10)
    assert 0.26e6 < describe(resnet)["trainable_parameters"] < 0.28e6  # He et al.: 0.27M
    assert len([layer for layer in resnet.layers if type(layer).__name__ == "Add"]) == 9
    with pytest.raises(ModelError, match="mobilenet_v2 needs images of at least 32x32"):
        build_model(ModelConfig("mobilenet_v2"), (28, 28, 1), 10)


def test_keras_file_models_are_checked(tmp_path):
    import keras

    from gui_app.engine.training.models import ModelError, build_model, outputs_logits

    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(10, activation="softmax")])
    path = tmp_path / "user.keras"
    model.save(path)
    loaded = build_model(ModelConfig("keras_file", str(path)), (8, 8, 1), 10)
    assert not outputs_logits(loaded)
    layer_softmax = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Softmax()])
    assert not outputs_logits(layer_softmax)
    assert outputs_logits(keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)]))
    with pytest.raises(ModelError, match=r"takes inputs of shape \(8, 8, 1\), the dataset has \(28, 28, 1\)"):
        build_model(ModelConfig("keras_file", str(path)), (28, 28, 1), 10)
    with pytest.raises(ModelError, match="outputs"):
        build_model(ModelConfig("keras_file", str(path)), (8, 8, 1), 3)
    (tmp_path / "junk.keras").write_text("not a zip")
    with pytest.raises(ModelError, match=r"junk\.keras is not a Keras model file \(a \.keras file is a zip archive; "
                                         r"this one is text\)"):
        build_model(ModelConfig("keras_file", str(tmp_path / "junk.keras")), (8, 8, 1), 10)


def test_events_are_valid_json_without_nan(tmp_path):
    from gui_app.core.events import ReplicaStats, RunFinished, Step, Warning
    from gui_app.engine.run.event_writer import EventWriter

    out = io.StringIO()
    writer = EventWriter("jsonl", out)
    writer.emit(Warning(message="before the run directory exists"))
    writer.attach(tmp_path)
    writer.emit(Step(step=1, loss=float("nan"), replicas=[ReplicaStats(replica=0, loss=float("inf"))]))
    writer.emit(RunFinished(status="completed", run_dir=str(tmp_path), step=1), durable=False)
    writer.close()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["type"] for e in lines] == ["warning", "step", "run_finished"]
    assert lines[1]["loss"] is None and lines[1]["replicas"][0]["loss"] is None
    on_disk = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["type"] for e in on_disk] == ["warning", "step"]  # run_finished was stdout-only


def test_control_words_and_end_of_input():
    from gui_app.engine.run.control import Control

    control = Control()
    control.command("pause")
    assert control.paused and not control.wait_while_paused(0.01)
    control.command("checkpoint")
    assert control.take_checkpoint_request() and not control.take_checkpoint_request()
    control.command("resume")
    assert not control.paused
    control.command("bogus")  # an unknown word changes nothing
    assert not (control.paused or control.stop_requested or control.take_checkpoint_request())
    thread = control.read_stream(io.StringIO("pause\nbogus\n"))
    thread.join(5)
    assert control.stop_requested and not control.paused  # end of input stops, and wakes a paused run
