"""Protocol 3's lean step lines (gui_app.core.event_lines): the same events as protocol 2's long
lines, at float32 precision, in about 60 % of the bytes; both forms, and a file holding both,
decode to equal events; the real engine writes the lean form."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gui_app.core import events as ev
from gui_app.core import rundir
from gui_app.core.event_lines import LineDecoder, LineEncoder, single
from gui_app.core.event_schema import event_problems

DEVICE = "/job:localhost/replica:0/task:0/device:CPU:{}"


def _f32(value: float) -> float:
    return float(np.float32(value))  # what TensorFlow hands the engine


def _events(workers: int = 1, steps: int = 6) -> list[ev.Event]:
    """A run of two replicas per worker (worker w's on task w), steps with TensorFlow's float32 figures."""
    infos = [ev.ReplicaInfo(replica=r, worker=r // 2, device=f"/job:worker/replica:0/task:{r // 2}/device:CPU:{r % 2}"
                            if workers > 1 else DEVICE.format(r)) for r in range(2 * workers)]
    out: list[ev.Event] = [ev.RunStarted(run_dir="/runs/a", config={}, total_steps=steps, num_replicas=len(infos),
                                         replicas=infos, num_workers=workers, time=1.0)]
    rng = np.random.default_rng(0)
    for step in range(1, steps + 1):
        replicas = [ev.ReplicaStats(replica=i.replica, worker=i.worker, device=i.device, loss=_f32(rng.random() * 3),
                                    accuracy=_f32(rng.random()), examples=32, grad_norm=_f32(rng.random()),
                                    step_time=_f32(rng.random() / 100), examples_per_sec=_f32(rng.random() * 3e4))
                    for i in infos]
        out.append(ev.Step(step=step, epoch=1, loss=_f32(rng.random()), accuracy=_f32(rng.random()),
                           learning_rate=_f32(0.003), examples_per_sec=rng.random() * 1e4, step_time=rng.random() / 10,
                           input_wait=rng.random() / 1e3, allreduce_time=rng.random() / 10, replicas=replicas,
                           time=1.0 + step / 7))
    out.append(ev.EpochEnd(epoch=1, step=steps, loss=0.5, accuracy=0.8, duration=2.5, time=9.0))
    out.append(ev.RunFinished(status="completed", run_dir="/runs/a", step=steps, time=9.5))
    return out


def _write(path, events: list[ev.Event], form: str) -> list[bytes]:
    encoder = LineEncoder(form)
    lines = [json.dumps(encoder.encode(e), separators=(",", ":")).encode() + b"\n" for e in events]
    path.mkdir(parents=True, exist_ok=True)
    (path / rundir.EVENTS_FILE).write_bytes(b"".join(lines))
    return lines


def _at_float32(value):
    """An event (or any value) with every float at float32 precision: what both forms keep."""
    if dataclasses.is_dataclass(value):
        return type(value)(**{f.name: _at_float32(getattr(value, f.name)) for f in dataclasses.fields(value)})
    if isinstance(value, list):
        return [_at_float32(v) for v in value]
    return _f32(value) if isinstance(value, float) else value


@pytest.mark.parametrize("workers", [1, 3])
def test_old_and_new_files_decode_to_the_same_events(tmp_path, workers):
    events = _events(workers)
    old = _write(tmp_path / "old", events, "full")
    new = _write(tmp_path / "new", events, "lean")
    read_old, read_new = rundir.read_events(tmp_path / "old"), rundir.read_events(tmp_path / "new")
    assert read_old == events  # protocol 2's lines keep every digit
    assert [_at_float32(e) for e in read_new] == [_at_float32(e) for e in events]
    # The devices are named once: by run_started, not by any step line.
    assert all(b"device" not in line for line in new if line.startswith(b'{"type":"step"'))
    assert [r.device for r in read_new[3].replicas] == [i.device for i in events[0].replicas]
    assert [r.worker for r in read_new[3].replicas] == [r // 2 for r in range(2 * workers)]
    old_step, new_step = len(old[3]), len(new[3])
    assert new_step < 0.65 * old_step
    for line in old + new:
        assert event_problems(json.loads(line)) == []  # one schema holds both forms


def test_a_lean_line_writes_figures_at_float32_precision_and_leaves_out_what_run_started_says():
    encoder = LineEncoder()
    encoder.encode(_events()[0])
    step = ev.Step(step=3, loss=_f32(1.9633662), learning_rate=_f32(0.003), step_time=0.0891460648002976,
                   time=1796300353.943, replicas=[ev.ReplicaStats(replica=0, worker=0, device=DEVICE.format(0),
                                                                  loss=_f32(0.25), examples=32),
                                                  ev.ReplicaStats(replica=1, worker=2, device="elsewhere")])
    line = json.dumps(encoder.encode(step), separators=(",", ":"))
    assert '"loss":1.9633662,' in line and '"learning_rate":0.003,' in line and '"step_time":0.08914606,' in line
    assert '"time":1796300353.943,' in line  # Unix seconds keep their milliseconds
    assert ('"replicas":[{"replica":0,"loss":0.25,"accuracy":null,"examples":32,"grad_norm":null,"step_time":null,'
            '"examples_per_sec":null},{"replica":1,"worker":2,"device":"elsewhere",') in line
    assert "memory_bytes" not in line
    assert single(float("nan")) is None and single(None) is None and single(1e300) == 1e300


def test_a_parameter_server_step_keeps_its_unknown_worker_and_device():
    events = _events()
    ps = ev.Step(step=7, per_worker=True, replicas=[ev.ReplicaStats(replica=0, worker=-1, device=None, loss=0.5)])
    encoder, decoder = LineEncoder(), LineDecoder()
    for event in events[:1]:
        decoder.value(encoder.encode(event))
    assert decoder.value(json.loads(json.dumps(encoder.encode(ps)))) == ps


def test_without_its_run_started_a_lean_step_keeps_its_worker_and_lacks_its_device(tmp_path):
    """``attach --from N`` starts after the run_started: the history keeps the devices it knows."""
    lines = _write(tmp_path, _events(workers=2), "lean")
    step = ev.decode_line(lines[2])
    assert [(r.replica, r.worker, r.device) for r in step.replicas] == [(0, 0, ""), (1, 0, ""), (2, 1, ""), (3, 1, "")]
    assert ev.decode_line(lines[2], parts=False) == LineDecoder().line(lines[2], parts=False)


def test_a_file_of_both_forms_reads_as_one_history(tmp_path):
    """A run written by an older version, resumed by this one: protocol 2's lines, then 3's."""
    events = _events(steps=8)
    first = _write(tmp_path, events[:5], "full")
    resumed = ev.RunStarted(**{**dataclasses.asdict(events[0]), "resumed": True, "start_step": 4,
                               "replicas": events[0].replicas})
    encoder = LineEncoder()
    second = [json.dumps(encoder.encode(e)).encode() + b"\n" for e in [resumed, *events[5:]]]
    (tmp_path / rundir.EVENTS_FILE).write_bytes(b"".join(first + second))
    history = rundir.read_history(tmp_path)
    assert list(history.replicas.steps.column(0)) == list(range(1, 9))
    assert history.replicas.devices == [DEVICE.format(0), DEVICE.format(1)]
    steps = [e for e in rundir.read_events(tmp_path) if isinstance(e, ev.Step)]
    assert [_at_float32(s) for s in steps] == [_at_float32(s) for s in events if isinstance(s, ev.Step)]


def test_the_real_engine_writes_lean_step_lines(trained_run):
    lines = (trained_run / rundir.EVENTS_FILE).read_bytes().splitlines()
    started = json.loads(lines[0])
    assert started["type"] == "run_started" and started["protocol"] == ev.PROTOCOL_VERSION == 3
    steps = [line for line in lines if line.startswith(b'{"type":"step"')]
    assert steps and all(b"device" not in line and b"null" not in line for line in steps)
    assert max(map(len, steps)) < 600  # protocol 2 wrote about 860 bytes a step with two replicas
    events = rundir.read_events(trained_run)
    devices = [r.device for r in events[0].replicas]
    assert len(devices) == 2 and all(devices)
    assert all([r.device for r in e.replicas] == devices for e in events if isinstance(e, ev.Step))
