"""The typed events (gui_app.core.events): one encode, one decode, and the schema derived from
the classes; old files (protocol 1) still decode."""
from __future__ import annotations

import json
import math

import pytest

from gui_app.core import events as ev
from gui_app.core.event_schema import event_problems, stream_problems
from gui_app.core.gpu_monitor import GpuSample


def _step(**extra) -> ev.Step:
    replicas = [ev.ReplicaStats(replica=r, worker=0, device=f"/job:localhost/replica:0/task:0/device:CPU:{r}",
                                loss=0.5 + r, accuracy=0.9, examples=32, grad_norm=1.5, step_time=0.01,
                                examples_per_sec=3200.0) for r in range(2)]
    return ev.Step(step=7, epoch=1, loss=0.6, accuracy=0.9, learning_rate=1e-3, examples_per_sec=6400.0,
                   step_time=0.01, replicas=replicas, time=12.5, **extra)


EXAMPLES = [
    ev.RunStarted(run_dir="/runs/a", config={"training": {"epochs": 1}}, total_steps=10, num_replicas=2,
                  replicas=[ev.ReplicaInfo(replica=0, device="CPU:0"), ev.ReplicaInfo(replica=1, device="CPU:1")],
                  data_seed=3, time=1.0),
    ev.Progress(stage="decode", what="images", done=10, total=40, time=1.0),
    _step(),
    _step(input_wait=0.002, allreduce_time=0.001, per_worker=True,
          gpus=[GpuSample(index=0, name="A100", utilization=87.0, memory_used=2**30, memory_total=2**34,
                          temperature=61.0, power=250.0)]),
    ev.EpochEnd(epoch=1, step=10, loss=0.5, accuracy=0.8, val_loss=None, val_accuracy=None, duration=2.5, time=2.0),
    ev.Checkpoint(step=10, path="/runs/a/checkpoints/ckpt-10", time=2.0),
    ev.Paused(step=4, time=2.0),
    ev.Continued(step=4, time=3.0),
    ev.Eval(loss=0.2, accuracy=0.95, examples=100, confusion_matrix=[[50, 0], [5, 45]], class_names=["0", "1"],
            per_class=[ev.ClassMetrics(index=0, name="0", precision=0.9, recall=1.0, f1=0.95, support=50)],
            examples_per_replica=[50, 50], duration=0.5, time=4.0),
    ev.Warning(message="skipped checkpoint ckpt-4", time=4.0),
    ev.Warning(message="worker 1 lost", worker=1, step=5, time=4.0),
    ev.Error(message="disk full", kind="disk", time=5.0),
    ev.RunFinished(status="failed", run_dir="/runs/a", step=10, message="disk full", resumable=True, time=5.0),
    ev.RunFinished(status="completed", run_dir="/runs/a", step=10, time=5.0),
]


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.TYPE)
def test_every_event_round_trips_through_a_json_line_and_follows_the_schema(event):
    line = json.dumps(ev.encode(event))
    assert ev.decode(json.loads(line)) == event
    assert event_problems(json.loads(line)) == []


def test_optional_keys_are_written_only_when_set():
    plain = ev.encode(_step())
    assert "gpus" not in plain and "per_worker" not in plain and "input_wait" not in plain
    assert set(ev.encode(ev.RunFinished(status="stopped", step=3))) == {"type", "time", "status", "run_dir", "step"}
    assert ev.encode(ev.RunFinished(status="stopped", step=3, message="stopped by SIGTERM"))["message"]


def test_non_finite_numbers_are_written_as_null_and_read_as_none():
    event = _step()
    event.loss = math.nan
    event.replicas[1].grad_norm = math.inf
    data = json.loads(json.dumps(ev.encode(event), allow_nan=False))
    assert data["loss"] is None and data["replicas"][1]["grad_norm"] is None
    back = ev.decode(data)
    assert back.loss is None and back.replicas[1].grad_norm is None and back.replicas[0].grad_norm == 1.5


def test_readers_ignore_unknown_keys_and_fill_missing_ones():
    event = ev.decode({"type": "step", "time": 1, "step": 3, "loss": 0.5, "brand_new_key": [1, 2],
                       "replicas": [{"replica": 0, "loss": 0.4, "later_metric": 7}]})
    assert event == ev.Step(time=1.0, step=3, loss=0.5, replicas=[ev.ReplicaStats(replica=0, loss=0.4)])


def test_protocol_1_files_still_decode():
    assert ev.decode({"type": "resumed", "time": 1, "step": 4}) == ev.Continued(time=1.0, step=4)
    started = ev.decode({"type": "run_started", "time": 1, "run_dir": "r", "config": {}})
    assert started.protocol == ev.PROTOCOL_VERSION and started.num_workers == 1  # defaults for keys it lacked


@pytest.mark.parametrize("value", [
    None, [1], "step", {"no": "type"}, {"type": 3}, {"type": "brand_new_event", "time": 1},
    {"type": "step", "time": 1},  # no step number
    {"type": "step", "time": 1, "step": "three"},
    {"type": "run_started", "time": 1, "config": {}},  # no run_dir
])
def test_what_is_not_an_event_decodes_to_none(value):
    assert ev.decode(value) is None


@pytest.mark.parametrize("line", ["", "\n", '{"type":"step","time":1,"st', "Epoch 1/5", "[" * 100_000 + "]" * 100_000,
                                  b'{"type": "brand_new_event", "time": 1}'])
def test_a_line_that_holds_no_event_decodes_to_none(line):
    assert ev.decode_line(line) is None  # blank, torn, another program's, nested too deep, a newer type


def test_a_line_decodes_as_its_event_with_or_without_its_parts():
    line = json.dumps(ev.encode(ev.Step(step=3, replicas=[ev.ReplicaStats(replica=0, loss=0.5)]))) + "\n"
    assert ev.decode_line(line) == ev.Step(step=3, replicas=[ev.ReplicaStats(replica=0, loss=0.5)])
    assert ev.decode_line(line.encode(), parts=False) == ev.Step(step=3)


def test_mistyped_values_take_their_default_and_bad_list_items_are_dropped():
    event = ev.decode({"type": "step", "time": 1, "step": 2.0, "loss": "0.5", "accuracy": True,
                       "replicas": [{"replica": 0}, {"no_replica": 1}, "x", None]})
    assert event.step == 2 and event.loss is None and event.accuracy is None
    assert [r.replica for r in event.replicas] == [0]


def test_the_schema_names_what_is_wrong():
    step = ev.encode(_step())
    assert event_problems({**step, "loss": "low"}) == ["step: 'loss' is str"]
    assert event_problems({**step, "step": True}) == ["step: 'step' is a boolean"]
    del step["replicas"][0]["grad_norm"]
    assert event_problems(step) == ["step 7 replicas[0]: missing 'grad_norm'"]
    assert event_problems({"type": "error", "time": 1, "message": "x", "kind": "oops"}) == [
        "error: kind must be one of ('config', 'input', 'training', 'disk', 'cluster', 'internal')"]
    assert event_problems(ev.encode(ev.RunFinished(status="failed", step=1))) == [
        "run_finished: a failed run says why in 'message'"]
    assert event_problems({"type": "later", "time": 1}) == ["unknown event type 'later'"]


def test_stream_rules():
    lines = [ev.encode(_step()), ev.encode(ev.RunFinished(status="completed", step=7))]
    assert stream_problems(lines) == []
    assert "run_finished is not the last event" in stream_problems(lines[::-1])
    assert "step numbers do not increase" in stream_problems([lines[0], lines[0]])


def test_a_step_splits_its_time_into_compute_input_and_the_rest():
    step = _step(input_wait=0.002)  # replicas computed 0.01 s of a 0.01 s step
    assert step.time_split() == (0.01, 0.0, 0.0)
    step.step_time = 0.02
    assert step.time_split() == pytest.approx((0.01, 0.002, 0.008))
    assert ev.Step(step=1).time_split() is None


def test_the_command_lines_text_of_each_event():
    from gui_app.engine.run.event_writer import format_text

    started = ev.RunStarted(run_dir="/runs/a", config={}, dataset={"name": "digits", "train_examples": 1437,
                                                                   "test_examples": 360},
                            model={"name": "mnist_cnn"}, strategy={"name": "mirrored"}, num_replicas=2,
                            replicas=EXAMPLES[0].replicas, total_steps=46)
    assert format_text(started) == ("Training mnist_cnn on digits (1,437 train / 360 test examples) with mirrored, "
                                    "2 replicas (CPU:0, CPU:1); 46 steps, run directory /runs/a")
    assert format_text(_step()) is None  # every 10th step only
    tenth = _step()
    tenth.step = 10
    assert format_text(tenth) == ("epoch 1 step 10: loss 0.6000 acc 0.9000 6400 ex/s  "
                                  "[replica loss r0:0.500 r1:1.500]")
    texts = [format_text(e) for e in EXAMPLES[1:]]
    assert texts[0] == "decode images: 10/40"
    assert texts[3] == "epoch 1 done in 2.5s: loss 0.5000 acc 0.8000 val_loss n/a val_acc n/a"
    assert texts[5:7] == ["paused at step 4", "continued at step 4"]
    assert texts[7] == "test: loss 0.2000 accuracy 0.9500 on 100 examples (per replica [50, 50])"
    # A failure's reason is the one stderr line: neither the error nor the run's end repeats it.
    assert texts[-3:] == [None, "run failed at step 10 (/runs/a)", "run completed at step 10 (/runs/a)"]
