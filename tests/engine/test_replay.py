"""The replay after a NaN trip (gui_app/engine/training/replay.py) on real runs: a diverging
mirrored run (SGD at learning rate 50 on digits) replayed from its last checkpoint names the
layer that overflowed; without a checkpoint it replays from the seeded initial weights; a user's
dataset with one extreme example has that example named; a healthy run replays nothing. Then the
rules that refuse a replay and deal a batch over the replicas, without TensorFlow."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
from engine_helpers import config_dict, run_in_process

from gui_app.core import rundir
from gui_app.core.config import DatasetConfig
from gui_app.core.diagnosis import diagnose, sentences
from gui_app.engine.training import replay
from gui_app.engine.training.pipeline import epoch_order, replica_parts, validation_rows

DIVERGING = {"epochs": 1, "global_batch_size": 64, "seed": 3, "steps_per_call": 2, "optimizer": "sgd",
             "learning_rate": 50.0}


def _tripped(tap) -> dict:
    (event,) = tap.of("non_finite")
    return event


def test_a_diverging_mirrored_run_is_replayed_from_its_checkpoint_to_the_layer_that_overflowed(tmp_path,
                                                                                               write_config):
    code, tap = run_in_process("train", write_config(config_dict(training={**DIVERGING, "checkpoint_every_steps": 2})),
                               tmp_path)
    assert code == 1
    event = _tripped(tap)
    saved = [e["step"] for e in tap.of("checkpoint")]
    assert event["checkpoint"].endswith(f"ckpt-{saved[-1]}") and saved[-1] < event["step"]
    # Reproduced at the guard's step: mnist_cnn's last layer overflowed (the weights grew 10^16x
    # over the steps before), so every example of the batch has a non-finite loss on its own.
    assert event["replayed"] is True and event["replay_step"] == event["step"] and "replay_note" not in event
    assert (event["layer"], event["layer_part"]) == ("logits", "activations")
    assert event["examples_count"] == 64 and len(event["examples"]) == replay.MAX_EXAMPLES
    assert 0 < event["replay_seconds"] < replay.MAX_SECONDS
    found = diagnose(rundir.list_runs(tmp_path)[0].path).findings[0]
    assert (found.layer, found.layer_part, found.replayed, found.examples) == ("logits", "activations", True,
                                                                                event["examples"])
    text = sentences(diagnose(rundir.list_runs(tmp_path)[0].path))
    assert f"a replay from ckpt-{saved[-1]}" in text and "output of layer logits" in text
    assert "every example of that batch has a non-finite loss alone" in text


def test_without_a_checkpoint_the_replay_starts_from_the_seeded_initial_weights(tmp_path, write_config):
    """One device (the default strategy) and no checkpoint: the initial weights are rebuilt from
    training.seed, and the replay reaches the same step as the run."""
    config = config_dict(training=DIVERGING, strategy={"name": "default", "devices": []})
    code, tap = run_in_process("train", write_config(config), tmp_path)
    assert code == 1 and not tap.of("checkpoint")
    event = _tripped(tap)
    assert event["checkpoint"] is None and event["replayed"] is True and event["replay_step"] == event["step"]
    assert event["layer"] == "logits"
    assert "a replay from the initial weights" in sentences(diagnose(rundir.list_runs(tmp_path)[0].path))


def _poisoned(tmp_path, poison: int, value: int = 255):
    """An 8x8 dataset of dim images with one bright one at ``poison`` (every pixel ``value``), and
    a model a user might bring whose outputs are exp(2 * the pixel sum): about 150 for a dim image,
    infinite for a white one, 1.4e38 (just finite) for pixels of 175."""
    import keras

    rng = np.random.default_rng(0)
    x = rng.integers(0, 10, (512, 8, 8, 1), dtype=np.uint8)
    x[poison] = value
    np.savez(tmp_path / "data.npz", x_train=x, y_train=np.arange(512) % 10,
             x_test=x[:64], y_test=np.arange(64) % 10)
    inputs = keras.Input((8, 8, 1))
    out = keras.layers.Dense(10, activation="exponential", kernel_initializer=keras.initializers.Constant(2.0),
                             name="boom")(keras.layers.Flatten(name="flat")(inputs))
    keras.Model(inputs, out).save(tmp_path / "exp.keras")


def _poisoned_config(tmp_path, seed: int | None, batch: int, **training) -> dict:
    return config_dict(dataset={"name": "npz", "path": str(tmp_path / "data.npz")},
                       model={"name": "keras_file", "path": str(tmp_path / "exp.keras")},
                       training={"epochs": 1, "global_batch_size": batch, "seed": seed, "optimizer": "sgd",
                                 **training})


def test_the_one_extreme_example_of_the_batch_is_named(tmp_path, write_config):
    """Mirrored, no seed and no checkpoint: a user's model file starts from its own weights, and
    the data order is the run's drawn seed (run_started.data_seed)."""
    batch = 32
    train_rows, _ = validation_rows(512, DatasetConfig(name="npz", path="x.npz"))
    poison = int(train_rows[100])
    _poisoned(tmp_path, poison)
    config = _poisoned_config(tmp_path, None, batch, steps_per_call=4, learning_rate=0.001)
    code, tap = run_in_process("train", write_config(config), tmp_path)
    assert code == 1 and not tap.of("checkpoint")
    order = train_rows[epoch_order(len(train_rows), 0, tap.of("run_started")[0]["data_seed"])]
    bad_step = int(np.flatnonzero(order == poison)[0]) // batch + 1
    event = _tripped(tap)
    assert event["step"] == bad_step and event["replayed"] is True and event["replay_step"] == bad_step
    assert (event["examples"], event["examples_count"]) == ([poison], 1)
    assert (event["layer"], event["layer_part"]) == ("boom", "activations")
    text = sentences(diagnose(rundir.list_runs(tmp_path)[0].path))
    assert f"the loss alone is non-finite for example {poison}, by its index in the training set: look at it" in text


def test_an_update_that_overflows_is_named_by_the_checkpoints_weight_check(tmp_path, write_config):
    """The bright example of the first batch makes a gradient of about 1e35 (every loss finite):
    at learning rate 1e4 the update overflows. The checkpoint of step 1 refuses the weights and the
    replay names the variable whose weights went first, in model order."""
    seed, batch = 5, 32
    train_rows, _ = validation_rows(512, DatasetConfig(name="npz", path="x.npz"))
    _poisoned(tmp_path, int(train_rows[epoch_order(len(train_rows), 0, seed)][0]), value=175)
    config = _poisoned_config(tmp_path, seed, batch, steps_per_call=1, learning_rate=1e4, checkpoint_every_steps=1)
    code, tap = run_in_process("train", write_config(config), tmp_path)
    assert code == 1 and "the weights became NaN or infinite by step 1" in tap.of("error")[0]["message"]
    event = _tripped(tap)
    assert (event["first"], event["replayed"], event["replay_step"]) == ("weights", True, 1)
    assert (event["layer"], event["layer_part"], event["examples"]) == ("boom/kernel", "weights", [])
    assert "found the weights boom/kernel after the update non-finite first, at step 1" in \
        sentences(diagnose(rundir.list_runs(tmp_path)[0].path))


def test_an_overflow_in_the_float16_all_reduce_is_named_where_the_replicas_were_finite(tmp_path, write_config):
    """The per-replica statistics cannot see it (each replica's norm was finite, 4e8); the replay
    sums the replicas' gradients in float16 as the all-reduce does, and finds the first variable
    that overflowed there, a step before the loss tripped the guard."""
    config = config_dict(strategy={"all_reduce_dtype": "float16"}, training=DIVERGING)
    code, tap = run_in_process("train", write_config(config), tmp_path)
    assert code == 1
    event = _tripped(tap)
    assert event["replayed"] is True and event["replay_step"] == event["step"] - 1
    # mnist_cnn's first variable (its conv layer; Keras numbers the names of a process's later models).
    assert re.fullmatch(r"conv2d(_\d+)?/kernel", event["layer"]) and event["layer_part"] == "all_reduced_gradients"
    assert "before the step whose loss tripped the guard" in event["replay_note"]
    steps = {e["step"]: e for e in tap.of("step")}
    assert all(r["grad_norm"] is not None for r in steps[event["replay_step"]]["replicas"])
    assert "the float16 all-reduce overflowed" in sentences(diagnose(rundir.list_runs(tmp_path)[0].path))


def test_a_replay_gives_up_at_its_time_bound(tmp_path, write_config, monkeypatch):
    monkeypatch.setattr(replay, "MAX_SECONDS", 0.0)
    config = config_dict(training=DIVERGING, strategy={"name": "default", "devices": []})
    code, tap = run_in_process("train", write_config(config), tmp_path)
    event = _tripped(tap)
    assert code == 1 and event["replayed"] is False and "layer" not in event
    assert event["replay_note"].startswith("it gave up after 0 s, at step 1 of the")
    assert "no replay named the layer: it gave up" in sentences(diagnose(rundir.list_runs(tmp_path)[0].path))


def test_a_healthy_run_replays_nothing(tmp_path, write_config, monkeypatch):
    asked = []
    monkeypatch.setattr(replay.Replayer, "explain", lambda self, step: asked.append(step))
    training = {"epochs": 1, "global_batch_size": 64, "seed": 3, "steps_per_call": 4}
    code, tap = run_in_process("train", write_config(config_dict(training=training)), tmp_path)
    assert code == 0 and asked == [] and not tap.of("non_finite")
    events = (rundir.list_runs(tmp_path)[0].path / rundir.EVENTS_FILE).read_text()
    assert "\"replayed\"" not in events and "\"layer\"" not in events


# ---- the rules, without TensorFlow --------------------------------------------------------------
def _ctx(mixed=False, coordinator=None, streamed=False, seed=1, model="mnist_cnn"):
    source = SimpleNamespace() if streamed else SimpleNamespace(train_batch=lambda *a: None)
    return SimpleNamespace(config=SimpleNamespace(training=SimpleNamespace(mixed_precision=mixed, seed=seed),
                                                  model=SimpleNamespace(name=model)),
                           built=SimpleNamespace(coordinator=coordinator), input=source)


@pytest.mark.parametrize("ctx, checkpoint, step, says", [
    (_ctx(), "runs/r/checkpoints/ckpt-40", 45, None),
    (_ctx(seed=None), None, 5, "training.seed is null"),
    (_ctx(seed=None), "c/ckpt-4", 5, None),
    (_ctx(seed=None, model="keras_file"), None, 5, None),  # a user's file holds its initial weights
    (_ctx(mixed=True), "c/ckpt-4", 5, "mixed precision"),
    (_ctx(coordinator=object()), "c/ckpt-4", 5, "parameter servers"),
    (_ctx(streamed=True), "c/ckpt-4", 5, "streamed input"),
    (_ctx(), "c/ckpt-4", 4 + replay.MAX_STEPS + 1, f"step 4) is {replay.MAX_STEPS + 1} steps before it"),
    (_ctx(), None, replay.MAX_STEPS + 1, "the start is"),
])
def test_what_cannot_be_replayed_is_said(ctx, checkpoint, step, says):
    why = replay.refusal(ctx, checkpoint, step)
    assert (why is None) if says is None else (says in why)


def test_the_replay_in_words():
    from gui_app.core.events import NonFinite
    from gui_app.core.finding_rules import replay_sentence

    assert replay_sentence(NonFinite(step=5), 64) == ""  # a run from before the replay
    assert replay_sentence(NonFinite(step=5, replayed=False, replay_note="streamed input: why"), 64) == \
        "no replay named the layer: streamed input: why"
    done = NonFinite(step=5, checkpoint="r/checkpoints/ckpt-4", replayed=True, replay_step=5, layer="dense_1/kernel",
                     layer_part="weights", examples=[], examples_count=0, replay_seconds=0.25)
    assert replay_sentence(done, 64) == ("a replay from ckpt-4 in 0.2 s found the weights dense_1/kernel after the "
                                         "update non-finite first, at step 5 (every loss of that step was finite: "
                                         "the update overflowed)")
    done.layer_part = "gradients"
    assert replay_sentence(done, 64).endswith("local gradient of dense_1/kernel (before the all-reduce) non-finite "
                                              "first, at step 5 (every loss of that step was finite: the backward "
                                              "pass overflowed)")
    done.layer, done.layer_part, done.examples, done.examples_count = "logits", "activations", list(range(10)), 12
    assert replay_sentence(done, 64).endswith("for examples 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 2 more, by their index "
                                              "in the training set: look at them, an extreme or mislabelled example")
    assert replay_sentence(done, 64, climbed=True).endswith("(where the climb showed first, not its cause)")


def test_a_batch_is_dealt_over_the_replicas_as_the_input_pipeline_deals_it():
    batch = np.arange(8)
    assert [p.tolist() for p in replica_parts(batch, [0, 0])] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # Two workers of two replicas: worker w takes every second example from w, its replicas halves of that.
    assert [p.tolist() for p in replica_parts(batch, [0, 0, 1, 1])] == [[0, 2], [4, 6], [1, 3], [5, 7]]
    assert [p.tolist() for p in replica_parts(np.arange(7), [0, 0])] == [[0, 1, 2, 3], [4, 5, 6]]
    assert json.dumps(replay.Replay(False, "why").fields())  # JSON-ready


def test_the_replay_deals_the_batches_the_mirrored_pipeline_deals():
    """The real input of two replicas, labels standing for the examples' indices: the replay's
    recomputed batches (step_rows, replica_parts) are the ones each replica trained on."""
    import tensorflow as tf

    from gui_app.engine.training.pipeline import distribute_train, step_rows

    strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
    rows = np.arange(3, 103, dtype=np.int64)  # a training part of a pool of 103
    images, labels = tf.zeros((103, 2, 2, 1), tf.uint8), tf.range(103, dtype=tf.int32)
    dealt = iter(distribute_train(strategy, images, labels, rows, epoch=1, start_batch=2, global_batch=8, seed=7))
    for batch in (2, 3):
        _, y = next(dealt)
        real = [t.numpy().tolist() for t in strategy.experimental_local_results(y)]
        assert real == [p.tolist() for p in replica_parts(step_rows(rows, 1, batch, 8, 7), [0, 0])]
