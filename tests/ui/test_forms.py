"""The forms over the RunConfig: round trip, inline validation, consistency between sections."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

import numpy as np
import pytest
from form_errors import shown_errors

from gui_app.core.config import (
    ConfigError,
    DatasetConfig,
    ModelConfig,
    RunConfig,
    RuntimeConfig,
    StrategyConfig,
    TrainingConfig,
)
from gui_app.ui.config import guess_dataset
from gui_app.ui.config.config_panel import first_launch_config


def test_first_launch_defaults(panel):
    config = panel.config()
    assert config == first_launch_config()
    assert (config.dataset.name, config.model.name, config.strategy.devices, config.runtime.cpu_devices) == (
        "digits", "mnist_cnn", ("CPU:0", "CPU:1"), 2)
    assert (config.training.epochs, config.training.global_batch_size, config.training.optimizer,
            config.training.learning_rate) == (5, 64, "adam", 0.001)
    assert panel.strategy.summary.text() == "2 replicas · global batch 64 · 32 per replica"


def test_every_section_round_trips(panel, tmp_path):
    keras_file = tmp_path / "net.keras"
    keras_file.write_bytes(b"x")
    config = RunConfig(
        dataset=DatasetConfig(name="image_folder", path=str(tmp_path), image_size=(48, 40), color_mode="grayscale",
                              validation="test", validation_split=0.25, test_split=0.3),
        model=ModelConfig(name="keras_file", path=str(keras_file)),
        strategy=StrategyConfig(name="mirrored", devices=("CPU:1", "CPU:2"), cross_device_ops="reduce_to_one"),
        training=TrainingConfig(epochs=7, global_batch_size=96, optimizer="adamw", learning_rate=3e-4,
                                weight_decay=0.01, schedule="step", warmup_steps=50, step_decay_epochs=3,
                                step_decay_rate=0.3, seed=None, steps_per_call=4, checkpoint_every_steps=100),
        runtime=RuntimeConfig(cpu_devices=3, gpu_memory_growth=False))
    panel.set_config(config)
    assert panel.config() == config, shown_errors(panel)
    one_device = config.replace(strategy=StrategyConfig(name="one_device", device="CPU:2"))
    panel.set_config(one_device)
    assert panel.config() == one_device


@pytest.mark.parametrize("text, message", [("abc", "must be a number; got 'abc'"), ("-1", "must be > 0; got -1.0")])
def test_bad_learning_rate_is_flagged_next_to_the_field(panel, qtbot, text, message):
    with qtbot.waitSignal(panel.validity_changed, check_params_cb=lambda valid: not valid):
        panel.training.learning_rate.setText(text)
    assert shown_errors(panel) == {"training.learning_rate": message}
    assert panel.training.learning_rate.property("invalid") is True
    with qtbot.waitSignal(panel.validity_changed, check_params_cb=bool):
        panel.training.learning_rate.setText("0.01")
    assert shown_errors(panel) == {} and panel.config().training.learning_rate == 0.01


def test_cross_section_errors_land_on_the_owning_field(panel):
    panel.training.global_batch_size.setValue(1)
    assert shown_errors(panel) == {"training.global_batch_size": "1 is smaller than the 2 replicas"}
    panel.training.global_batch_size.setValue(64)
    panel.dataset.validation_split.setValue(0.0)
    assert "dataset.validation_split" in shown_errors(panel) and panel.config() is None
    panel.dataset.validation.setCurrentIndex(panel.dataset.validation.findData("none"))
    assert shown_errors(panel) == {} and panel.config().dataset.validation == "none"


def test_mirrored_needs_a_ticked_device(panel):
    panel.devices.boxes["CPU:0"].setChecked(False)
    panel.devices.boxes["CPU:1"].setChecked(False)
    assert shown_errors(panel) == {"strategy.devices": "tick at least one device in the Devices panel"}
    panel.devices.boxes["CPU:1"].setChecked(True)
    assert panel.config().strategy.devices == ("CPU:1",)
    assert panel.strategy.summary.text().startswith("1 replica ·")


def test_fewer_cpu_replicas_untick_the_devices_that_disappear(panel):
    panel.devices.cpu_devices.setValue(4)
    panel.devices.boxes["CPU:3"].setChecked(True)
    assert panel.config().strategy.devices == ("CPU:0", "CPU:1", "CPU:3")
    panel.devices.cpu_devices.setValue(2)
    assert panel.config().strategy.devices == ("CPU:0", "CPU:1")
    assert panel.config().runtime.cpu_devices == 2


def test_ticks_apply_to_the_mirrored_strategy_only(panel):
    panel.strategy.name.setCurrentIndex(panel.strategy.name.findData("default"))
    assert not panel.devices.boxes["CPU:0"].isEnabled()
    assert not panel.strategy.cross_device_ops.isEnabled()
    assert panel.config().strategy == StrategyConfig(name="default")
    assert panel.strategy.summary.text() == "1 replica · global batch 64 · 64 per replica"


def test_uneven_batch_warns(panel):
    panel.training.global_batch_size.setValue(65)  # over the first launch's 2 replicas
    assert panel.strategy.summary.text() == "2 replicas · global batch 65: 33 and 32 examples"
    panel.devices.cpu_devices.setValue(3)
    panel.devices.boxes["CPU:2"].setChecked(True)
    panel.training.global_batch_size.setValue(64)
    assert "does not divide evenly over 3 replicas" in panel.strategy.balance_warning.text()
    assert "Try 63 or 66" in panel.strategy.balance_warning.text()
    panel.training.global_batch_size.setValue(66)
    assert panel.strategy.balance_warning.text() == ""


def test_the_form_says_the_engines_words_for_a_split_a_cluster_cannot_run(panel):
    """The one rule (core/batch_split.py): one process warns, several workers refuse, same words."""
    from gui_app.core.batch_split import batch_split

    panel.training.global_batch_size.setValue(64)
    _strategy(panel, "multi_worker_mirrored").cluster.workers.setValue(2)
    panel.strategy.set_replicas_per_worker(3)
    assert panel.strategy.balance_warning.text() == batch_split("multi_worker_mirrored", 64, 6, workers=2).error
    panel.strategy.set_replicas_per_worker(4)  # 8 replicas: 64 splits evenly
    assert panel.strategy.balance_warning.text() == ""
    panel.strategy.cluster.workers.setValue(1)
    panel.strategy.set_replicas_per_worker(3)
    assert panel.strategy.balance_warning.text() == batch_split("mirrored", 64, 3).warning


def test_the_form_says_what_a_clusters_workers_refuse_with_micro_batches_and_a_small_batch(panel):
    """The rule's errors the config cannot say (it does not know a cluster's replicas): the form
    said nothing and the workers refused the run."""
    from gui_app.core.batch_split import batch_split

    _strategy(panel, "multi_worker_mirrored").cluster.workers.setValue(2)
    panel.devices.cpu_devices.setValue(4)  # each worker's replicas: 8 in all
    panel.training.global_batch_size.setValue(16)
    panel.training.accumulation_steps.setValue(4)  # 2 examples per replica: 4 micro-batches do not fit
    said = batch_split("multi_worker_mirrored", 16, 8, workers=2, accumulation=4).error
    assert said and said.startswith("training.accumulation_steps: 4 micro-batches do not fit the 2 examples")
    assert panel.strategy.balance_warning.text() == said
    panel.training.accumulation_steps.setValue(1)
    panel.training.global_batch_size.setValue(4)
    assert panel.strategy.balance_warning.text() == batch_split("multi_worker_mirrored", 4, 8, workers=2).error
    panel.training.global_batch_size.setValue(16)
    assert panel.strategy.balance_warning.text() == ""
    _strategy(panel, "one_device")
    panel.training.accumulation_steps.setValue(32)  # more micro-batches than examples: the training section says it
    assert panel.strategy.balance_warning.text() == ""


def test_mixed_precision_only_with_a_gpu(panel, qtbot, fake_engine):
    assert not panel.training.mixed_precision.isEnabled()
    fake_engine.configure("gpu")
    with qtbot.waitSignal(panel.devices.detected, timeout=10_000):
        panel.start_detection()
    assert "GPU:0" in panel.devices.available_devices()
    assert not panel.training.mixed_precision.isEnabled()  # detected, but not ticked
    panel.devices.boxes["GPU:0"].setChecked(True)
    assert panel.training.mixed_precision.isEnabled()
    panel.training.mixed_precision.setChecked(True)
    assert panel.config().training.mixed_precision is True
    panel.devices.boxes["GPU:0"].setChecked(False)
    assert panel.config().training.mixed_precision is False


def test_first_launch_prefers_detected_gpus(panel, qtbot, fake_engine):
    fake_engine.configure("gpu")
    panel.prefer_gpus = True
    with qtbot.waitSignal(panel.devices.detected, timeout=10_000):
        panel.start_detection()
    assert panel.config().strategy.devices == ("GPU:0",)


def test_missing_dataset_file_is_flagged_at_once(panel, tmp_path):
    missing = tmp_path / "nope.npz"
    panel.dataset.name.setCurrentIndex(panel.dataset.name.findData("npz"))
    assert shown_errors(panel) == {"dataset.path": "dataset 'npz' needs a path"}
    panel.dataset.path.setText(str(missing))
    assert shown_errors(panel) == {"dataset.path": f"no such file or folder: {missing}"}
    assert not panel.is_valid()


def test_inspection_fills_model_summary_and_preview(panel, qtbot):
    with qtbot.waitSignal(panel.inspected, timeout=10_000) as got:
        panel.inspector.retry()
    result, samples = got.args
    assert result["dataset"]["class_names"] == [str(i) for i in range(10)]
    assert panel.model.parameters.text() == "1,234 (1,200 trainable)"
    assert panel.model.layers.topLevelItemCount() == 2
    assert "10 classes · input 8×8×1 · 1,000 train / 50 test examples" in panel.dataset.status.text()
    assert np.load(samples)["x"].shape == (30, 8, 8, 1)


def test_a_newer_inspection_replaces_the_one_in_flight(qtbot, fake_engine):
    """The older answer would describe a dataset no longer chosen: it is never shown, and its
    engine process is ended."""
    import sys

    from gui_app.ui.workers.inspector import Inspector

    hung = "import time; time.sleep(60)"
    commands = []

    def engine_command(*args):  # the first inspection hangs, the second is the fake engine's
        commands.append(args)
        return [sys.executable, "-c", hung] if len(commands) == 1 else fake_engine(*args)

    inspector = Inspector(engine_command, delay_ms=0)
    answers = []
    inspector.inspected.connect(lambda pair, answer, _samples: answers.append((pair, answer)))
    with qtbot.waitSignal(inspector.started, timeout=10_000):
        inspector.request(DatasetConfig(name="digits"), ModelConfig(name="mlp"))
    first = inspector._job
    with qtbot.waitSignals([inspector.inspected, first.destroyed], timeout=10_000):  # deleted once it has ended
        inspector.request(DatasetConfig(name="digits"), ModelConfig(name="mnist_cnn"))
    # Each answer names the sections it is about.
    assert [(pair[1].name, a["model"]["name"]) for pair, a in answers] == [("mnist_cnn", "mnist_cnn")]
    assert not inspector.is_busy()


def test_inspection_failure_is_shown_under_the_dataset(panel, qtbot, tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"bad data")
    with qtbot.waitSignal(panel.inspect_failed, timeout=10_000) as got:
        panel.dataset.open_path(bad)
    # The CLI's "replica-studio inspect:" prefix is dropped; the TensorFlow line before it is not taken.
    assert got.args == [f"{bad}: not an .npz file (no zip signature at its start)"]
    assert panel.dataset.status.text() == f"{bad}: not an .npz file (no zip signature at its start)"
    assert panel.is_valid()  # the form is fine; the engine will say the same if trained


def test_guess_dataset(tmp_path):
    npz = tmp_path / "d.npz"
    np.savez(npz, x=np.zeros((1, 2, 2)))
    assert guess_dataset(npz) == ("npz", str(npz))
    cifar = tmp_path / "cifar-10-batches-py"
    cifar.mkdir()
    (cifar / "data_batch_1").write_bytes(b"")
    assert guess_dataset(cifar) == ("cifar10", str(cifar))
    idx = tmp_path / "idx"
    idx.mkdir()
    (idx / "train-images-idx3-ubyte.gz").write_bytes(b"")
    assert guess_dataset(idx) == ("idx", str(idx))
    assert guess_dataset(idx / "train-images-idx3-ubyte.gz") == ("idx", str(idx))
    images = tmp_path / "images"
    (images / "cats").mkdir(parents=True)
    assert guess_dataset(images) == ("image_folder", str(images))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="holds no CIFAR batches"):
        guess_dataset(empty)
    text = tmp_path / "notes.txt"
    text.write_text("x")
    with pytest.raises(ConfigError, match="notes.txt is not a dataset file"):
        guess_dataset(text)


def test_the_wheel_scrolls_the_form_instead_of_changing_a_field(panel, qtbot):
    panel.resize(panel.minimumWidth(), 300)  # short: the form scrolls
    panel.show()
    epochs = panel.training.epochs
    before, scroll = epochs.value(), panel.verticalScrollBar()
    scroll.setValue(scroll.maximum())

    def wheel(widget):
        centre = QPointF(widget.rect().center())
        QApplication.sendEvent(widget, QWheelEvent(centre, QPointF(widget.mapToGlobal(centre.toPoint())), QPoint(),
                                                   QPoint(0, 120), Qt.MouseButton.NoButton,
                                                   Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase,
                                                   False))

    wheel(epochs)  # passing over it
    assert epochs.value() == before and scroll.value() < scroll.maximum()
    epochs.setFocus()
    qtbot.waitUntil(epochs.hasFocus)
    wheel(epochs)  # clicked into: the wheel is for it
    assert epochs.value() == before + 1


def _strategy(panel, name):
    panel.strategy.name.setCurrentIndex(panel.strategy.name.findData(name))
    return panel.strategy


def test_communication_options_round_trip_and_grey_out_where_they_do_not_apply(panel):
    form, training = panel.strategy, panel.training
    assert form.all_reduce_dtype.isEnabled() and not form.bytes_per_pack.isEnabled()  # mirrored: no packs
    assert "Mirrored and multi-worker mirrored only" in form.all_reduce_dtype.toolTip()
    assert "MirroredStrategy's reductions ignore it" in form.bytes_per_pack.toolTip()
    form.all_reduce_dtype.setCurrentIndex(form.all_reduce_dtype.findData("float16"))
    training.accumulation_steps.setValue(4)
    config = panel.config()
    assert (config.strategy.all_reduce_dtype, config.training.accumulation_steps) == ("float16", 4)
    panel.set_config(config)
    assert panel.config() == config
    _strategy(panel, "multi_worker_mirrored")
    form.cluster.workers.setValue(2)
    assert form.bytes_per_pack.isEnabled()
    form.bytes_per_pack.setValue(65536)
    mwms = panel.config()
    assert (mwms.strategy.bytes_per_pack, mwms.strategy.all_reduce_dtype) == (65536, "float16")
    panel.set_config(RunConfig())
    panel.set_config(mwms)
    assert panel.config() == mwms and form.bytes_per_pack.value() == 65536
    _strategy(panel, "one_device")
    assert not form.all_reduce_dtype.isEnabled() and not form.bytes_per_pack.isEnabled()
    one = panel.config()  # the greyed values are not sent: they would be config errors there
    assert (one.strategy.all_reduce_dtype, one.strategy.bytes_per_pack) == ("float32", 0)
    assert one.training.accumulation_steps == 4
    _strategy(panel, "parameter_server")
    form.cluster.workers.setValue(2)
    form.cluster.ps.setValue(1)
    assert not training.accumulation_steps.isEnabled() and panel.config().training.accumulation_steps == 1


def test_communication_errors_land_on_their_fields(panel):
    panel.training.accumulation_steps.setValue(40)
    assert shown_errors(panel) == {
        "training.accumulation_steps": "40 micro-batches do not fit the 32 examples per replica"}
    panel.training.accumulation_steps.setValue(0)
    assert shown_errors(panel) == {"training.accumulation_steps": "must be in [1, 64]; got 0"}
    panel.training.accumulation_steps.setValue(2)
    _strategy(panel, "multi_worker_mirrored").cluster.workers.setValue(2)
    panel.strategy.bytes_per_pack.setValue(2**30 + 1)
    assert shown_errors(panel) == {"strategy.bytes_per_pack": "must be in [0, 1073741824] (1 GiB); got 1073741825"}
    assert panel.strategy.bytes_per_pack.property("invalid") is True


def test_every_field_is_labelled_as_messages_name_it(panel):
    """Messages name a setting by its form label (gui_app.core.wording): every field has one."""
    from gui_app.core.wording import LABELS

    keys = [key for form in panel.forms for key in form._fields]
    assert len(keys) > 30 and [key for key in keys if key not in LABELS] == []


def test_a_text_file_posing_as_a_model_is_named_and_the_dataset_summary_stays(qtbot, fake_engine, tmp_path):
    """The real engine checks the forms (devices faked): the model field gets the engine's line
    about the file, and the dataset's summary does not vanish with it."""
    from gui_app.identity import app_command
    from gui_app.ui.config.config_panel import ConfigPanel

    def engine(*args: str) -> list[str]:
        return app_command(*args) if args[0] == "inspect" else fake_engine(*args)

    panel = ConfigPanel(engine)
    qtbot.addWidget(panel)
    panel.set_config(first_launch_config())
    model = tmp_path / "notmodel.keras"
    model.write_text("these are my notes, not a model\n")
    try:
        with qtbot.waitSignal(panel.inspected, timeout=120_000):
            panel.model.open_path(model)
    finally:
        panel.inspector.cancel()
    line = f"{model} is not a Keras model file (a .keras file is a zip archive; this one is text)"
    assert panel.model.status.text() == f"File: {line}"
    # Was emptied along with the model's error.
    assert panel.dataset.status.text() == "10 classes · input 8×8×1 · 1,438 train / 359 test examples"
    assert panel.train_blocker() == f"The check of the dataset and model failed: File: {line}"
    assert panel.model.parameters.text() == "—"
