"""The benchmarks' generator of long runs (benchmarks/long_runs.py) writes a valid run of the size
asked, in either line form, that reads back as that many steps and replicas."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gui_app.core import events as ev
from gui_app.core import rundir
from gui_app.core.config import RunConfig
from gui_app.core.event_lines import LineEncoder
from gui_app.core.event_schema import stream_problems

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import long_runs


@pytest.fixture
def source(tmp_path) -> Path:
    """A short run of 2 replicas, 20 steps in 2 epochs of 10, as the engine writes it."""
    run = tmp_path / "source"
    run.mkdir()
    (run / rundir.CONFIG_FILE).write_text(RunConfig.from_dict(long_runs.SOURCE_CONFIG).to_json())
    infos = [ev.ReplicaInfo(replica=r, device=long_runs.DEVICE.format(r)) for r in range(2)]
    events: list[ev.Event] = [ev.RunStarted(run_dir=str(run), config={}, total_steps=20, steps_per_epoch=10, epochs=2,
                                            num_replicas=2, replicas=infos, time=100.0)]
    for step in range(1, 21):
        replicas = [ev.ReplicaStats(replica=r, device=infos[r].device, loss=1.0 / step + r, accuracy=0.5, examples=32,
                                    grad_norm=0.7, step_time=0.01, examples_per_sec=3200.0) for r in range(2)]
        events.append(ev.Step(step=step, epoch=(step - 1) // 10 + 1, loss=1.0 / step, accuracy=0.5,
                              learning_rate=0.001, examples_per_sec=6400.0, step_time=0.02, replicas=replicas,
                              time=100.0 + step * 0.02))
        if step % 10 == 0:
            events.append(ev.EpochEnd(epoch=step // 10, step=step, loss=0.3, accuracy=0.6, time=100.0 + step * 0.02))
    events.append(ev.Eval(loss=0.2, accuracy=0.93, examples=100, time=101.0))
    events.append(ev.RunFinished(status="completed", run_dir=str(run), step=20, time=101.0))
    encoder = LineEncoder()
    (run / rundir.EVENTS_FILE).write_text("".join(json.dumps(encoder.encode(e)) + "\n" for e in events))
    return run


@pytest.mark.parametrize("form", ["old", "new"])
def test_the_generator_writes_a_valid_run_of_the_size_asked(tmp_path, source, form):
    run = long_runs.write_run(source, tmp_path / "runs", steps=300, replicas=5, form=form, epochs=30)
    lines = (run / rundir.EVENTS_FILE).read_bytes().splitlines()
    values = [json.loads(line) for line in lines]
    assert stream_problems(values) == []
    assert [v["type"] for v in values].count("epoch_end") == 30  # one per epoch of 10 steps
    step_lines = [line for line in lines if line.startswith(b'{"type":"step"')]
    assert len(step_lines) == 300
    assert all((b'"device":"/job' in line) == (form == "old") for line in step_lines)
    assert values[0]["protocol"] == (2 if form == "old" else ev.PROTOCOL_VERSION)

    events = rundir.read_events(run)
    steps = [e for e in events if isinstance(e, ev.Step)]
    assert [s.step for s in steps] == list(range(1, 301))
    assert all([(r.replica, r.device) for r in s.replicas] == [(r, long_runs.DEVICE.format(r)) for r in range(5)]
               for s in steps)
    assert steps[20].loss == pytest.approx(1.0)  # step 21 repeats the source's step 1
    assert steps[-1].time > steps[0].time and steps[-1].epoch == 30
    info = rundir.read_run(run)
    assert (info.status, info.step, info.total_steps, info.test_accuracy) == ("completed", 300, 300, 0.93)


def test_the_new_form_is_the_smaller(tmp_path, source):
    sizes = {form: (long_runs.write_run(source, tmp_path, 300, 8, form) / rundir.EVENTS_FILE).stat().st_size
             for form in ("old", "new")}
    assert sizes["new"] < 0.6 * sizes["old"]
