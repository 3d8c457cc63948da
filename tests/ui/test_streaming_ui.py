"""The UI of streamed input (issue 10): the dataset form's new keys, the input-bound line on
the Training tab, and the Prepare dataset dialog running the real ``prepare`` engine process."""
from __future__ import annotations

import json

import pytest
from form_errors import shown_errors

from gui_app.core import events as ev
from gui_app.core.config import DatasetConfig, RunConfig
from gui_app.core.history import RunHistory
from gui_app.core.history.timing import InputWait
from gui_app.ui.config import guess_dataset
from gui_app.ui.config.dataset_form import DatasetForm
from gui_app.ui.dialogs.prepare import PrepareDialog
from gui_app.ui.tabs.input_bound import THRESHOLD
from gui_app.ui.tabs.training import TrainingTab


@pytest.mark.parametrize("section", [
    dict(name="tfrecord", path="{tmp}", test_path="{tmp}", label_offset=1, loading="stream", cache="file",
         image_size=(64, 48), color_mode="grayscale"),
    dict(name="tfds", tfds_name="mnist:3.0.1", data_dir="{tmp}", loading="auto", memory_budget_mb=512,
         cache="memory"),
    dict(name="image_folder", path="{tmp}", loading="memory", shuffle_buffer=777),
])
def test_dataset_form_round_trips_the_stream_keys(qtbot, tmp_path, section):
    form = DatasetForm()
    qtbot.addWidget(form)
    values = {k: (v.format(tmp=tmp_path) if isinstance(v, str) else v) for k, v in section.items()}
    config = DatasetConfig(**values)
    form.set_config_section(config)
    assert form.config_section() == config
    assert form.label_offset.isEnabled() == (config.name == "tfrecord")
    assert form.tfds_name.isEnabled() == (config.name == "tfds")
    assert form.memory_budget.isEnabled() == (config.loading == "auto")


# The fields of dataset.image_size, color_mode, loading, memory_budget_mb, cache and test_split.
STREAM_FIELDS = ("image_height", "color_mode", "loading", "memory_budget", "cache", "test_split")


def test_dataset_form_shows_only_the_rows_that_apply(qtbot):
    form = DatasetForm()
    qtbot.addWidget(form)
    form.show()
    shown = lambda *fields: [getattr(form, field).isVisible() for field in fields]  # noqa: E731
    form.set_config_section(DatasetConfig(name="digits"))
    assert not any(shown(*STREAM_FIELDS, "path", "tfds_name"))
    assert shown("validation") == [True] and not form.cache.isEnabled()
    form.set_config_section(DatasetConfig(name="tfrecord", path="/x"))
    assert all(shown(*STREAM_FIELDS, "path", "label_offset"))
    assert shown("tfds_name") == [False]
    # An error about a row that is hidden is shown where the user can read it, naming the key.
    form.set_config_section(DatasetConfig(name="digits"))
    form.show_error("dataset.cache", "must be one of none, auto")
    assert shown_errors(form) == {"dataset": "dataset.cache: must be one of none, auto"}


def test_memory_budget_default_shows_a_quarter_of_ram(qtbot):
    form = DatasetForm()
    qtbot.addWidget(form)
    form.set_config_section(DatasetConfig(name="tfrecord", path="/x"))
    from gui_app.core.memory import default_budget_bytes, format_bytes

    text = form.memory_budget.specialValueText()
    assert form.memory_budget.value() == 0 and "25 % of RAM" in text and format_bytes(default_budget_bytes()) in text


def test_guess_dataset_finds_tfrecord_shards(tmp_path):
    (tmp_path / "train-00000-of-00002.tfrecord").write_bytes(b"")
    assert guess_dataset(tmp_path) == ("tfrecord", str(tmp_path))


def _step(i: int, wait: float, step_time: float = 0.1) -> ev.Step:
    return ev.Step(step=i, loss=1.0, accuracy=0.5, learning_rate=0.001, step_time=step_time, input_wait=wait)


def test_input_wait_share_of_recent_steps():
    wait = InputWait(window=4)
    assert wait.fraction() is None
    for i in range(4):
        wait.add_step(_step(i, 0.05))
    assert wait.fraction() == pytest.approx(0.5)
    for i in range(4):  # the window moves on: old waits no longer count
        wait.add_step(_step(i, 0.0))
    assert wait.fraction() == 0.0
    assert not wait.add_step(ev.Step(step=9, step_time=0.1))  # events without input_wait (in-memory engines)


def test_training_tab_says_when_the_run_is_input_bound(qtbot):
    charts = TrainingTab()
    qtbot.addWidget(charts)
    charts.history.add([_step(i, 0.001) for i in range(1, 20)])
    assert charts.input_bound.isHidden()
    charts.history.add([_step(i, 0.06) for i in range(20, 80)])
    assert not charts.input_bound.isHidden()
    assert charts.input_bound.text().startswith("input-bound: the replicas waited 60% of the time for data")
    assert "Prepare dataset" in charts.input_bound.text() and THRESHOLD < 0.6
    charts.set_history(RunHistory())
    assert charts.input_bound.isHidden()


def test_training_tab_calls_a_wait_of_local_workers_on_in_memory_digits_cpu_contention(qtbot):
    """Two workers on the bundled digits on two cores were told to cache the set and convert it
    to TFRecord shards: the examples are in memory, the workers share the cores."""
    charts = TrainingTab()
    qtbot.addWidget(charts)
    started = ev.RunStarted(
        run_dir="/runs/r", config={"strategy": {"name": "multi_worker_mirrored", "workers": 2, "cluster": None}},
        num_replicas=2, num_workers=2, cpu_cores=2, dataset={"name": "digits", "input_shape": [8, 8, 1]},
        replicas=[ev.ReplicaInfo(replica=i, worker=i, device=f"/job:worker/replica:0/task:{i}/device:CPU:0")
                  for i in range(2)])
    charts.history.add([started, *(_step(i, 0.05) for i in range(1, 40))])
    text = charts.input_bound.text()
    assert not charts.input_bound.isHidden()
    assert "the cores are shared (2 workers × 2 threads each on 2 cores), so this is CPU contention" in text
    assert not text.startswith("input-bound") and "TFRecord" not in text and "Prepare dataset" not in text


def test_prepare_dialog_runs_the_engine_and_offers_the_shards(qtbot, tmp_path):
    dialog = PrepareDialog(DatasetConfig(name="digits"), folder=tmp_path)
    qtbot.addWidget(dialog)
    dialog._output.setText(str(tmp_path / "shards"))
    dialog._shards.setValue(2)
    with qtbot.waitSignal(dialog.succeeded, timeout=180_000) as ok:
        dialog.start()
    result = ok.args[0]
    assert result.train + result.test == 1797
    manifest = json.loads((tmp_path / "shards" / "manifest.json").read_text())
    assert len([f for f in manifest["files"] if f["split"] == "train"]) == 2
    assert dialog._progress.value() == 1000 and dialog._use.isEnabled()
    with qtbot.waitSignal(dialog.use_shards) as used:
        dialog._use.click()
    assert used.args == [str(tmp_path / "shards")]

    again = PrepareDialog(DatasetConfig(name="digits"))
    qtbot.addWidget(again)
    again._output.setText(str(tmp_path / "shards"))  # not empty now: exit 2, one line
    with qtbot.waitSignal(again.failed, timeout=180_000) as failed:
        again.start()
    assert "not an empty folder" in failed.args[0] and not again.is_running()
    assert RunConfig.load(again.command()[again.command().index("prepare") + 1]).dataset.name == "digits"


def test_prepare_dialog_over_the_forms_switches_them_to_the_shards(qtbot, tmp_path, panel, fake_engine):
    panel.dataset.set_config_section(DatasetConfig(name="digits", image_size=(16, 16), color_mode="grayscale"))
    dialog = PrepareDialog.for_forms(panel, panel, fake_engine)
    qtbot.addWidget(dialog)
    (tmp_path / "manifest.json").write_text(json.dumps({"image_shape": [16, 16, 1], "files": []}))
    dialog.use_shards.emit(str(tmp_path))
    section = panel.dataset.config_section()
    assert (section.name, section.path, section.image_size, section.color_mode) == (
        "tfrecord", str(tmp_path), (16, 16), "grayscale")
    dialog.close()
