"""The findings of ``diagnose`` (gui_app/core/diagnosis.py) from run folders written here event by
event: which step, replica and figure went non-finite first, the gradient-norm history and the
checkpoint really kept, a stall of a live run (its lock really held), and an input-bound run."""
from __future__ import annotations

import contextlib
import json
import os

import pytest

from gui_app.core import diagnosis, live_runs, run_lock
from gui_app.core.answers import Diagnosis, decode, encode, problems
from gui_app.core.config import RunConfig
from gui_app.core.events import (
    EpochEnd,
    Error,
    NonFinite,
    Paused,
    ReplicaInfo,
    ReplicaStats,
    RunFinished,
    RunStarted,
    Step,
)
from gui_app.core.events import encode as encode_event
from gui_app.core.rundir import CHECKPOINT_DIR, CONFIG_FILE, EVENTS_FILE

T0 = 1.8e9


def _run(tmp_path, events, mixed=False, name="run"):
    run = tmp_path / name
    run.mkdir(exist_ok=True)
    RunConfig().save(run / CONFIG_FILE)
    config = {"training": {"mixed_precision": mixed}}
    started = RunStarted(time=T0, run_dir=str(run), config=config, total_steps=400, steps_per_epoch=100,
                         num_replicas=2, replicas=[ReplicaInfo(replica=0), ReplicaInfo(replica=1)])
    lines = [json.dumps(encode_event(e), separators=(",", ":")) for e in [started, *events]]  # as the engine
    (run / EVENTS_FILE).write_text("\n".join(lines) + "\n")
    return run


def _step(n, norms, losses=(1.0, 1.0), time=None, input_wait=None, step_time=0.1):
    replicas = [ReplicaStats(replica=r, loss=losses[r], grad_norm=norms[r]) for r in range(2)]
    return Step(time=time or T0 + n, step=n, loss=1.0, step_time=step_time, input_wait=input_wait, replicas=replicas,
                learning_rate=0.5)


def _failed(step, **kwargs):
    return [NonFinite(time=T0 + step, step=step, **kwargs), Error(message="the loss became NaN", kind="training"),
            RunFinished(status="failed", step=step, message="the loss became NaN")]


def test_a_climbing_norm_names_the_replica_the_step_and_the_rate(tmp_path):
    steps = [_step(n, (10.0 ** n, 1.0)) for n in range(1, 8)]
    run = _run(tmp_path, [*steps, *_failed(8, first="loss", replica=0, worker=0, replicas=[0])])
    found = diagnosis.diagnose(run)
    assert found.status == "failed"
    (f,) = found.findings
    assert (f.kind, f.step, f.replica, f.worker, f.first, f.replicas) == ("non_finite", 8, 0, 0, "loss", [0])
    assert f.grad_norms == [[n, 10.0 ** n] for n in range(1, 8)] and f.growth == pytest.approx(1e6)
    assert f.checkpoint is None and f.learning_rate == 0.5
    assert "replica 0 went non-finite first, at step 8: its loss" in f.message
    assert "grew 10^6x over 6 steps" in f.message and "lower training.learning_rate (it was 0.5)" in f.message
    assert "no good checkpoint was kept" in f.message
    line = encode(found)
    assert problems(Diagnosis, line) == [] and encode(decode(Diagnosis, json.loads(json.dumps(line)))) == line


def test_a_norm_gone_bad_in_an_earlier_group_is_the_gradients_going_first(tmp_path):
    """The guard trips on the loss; a replica whose norm was not finite beside a finite loss was
    written as null one group earlier: its gradients went first, one step before the loss."""
    steps = [_step(n, (2.0, 2.0)) for n in range(1, 6)] + [_step(6, (2.0, None))]
    run = _run(tmp_path, [*steps, *_failed(7, first="loss", replica=0, worker=0, replicas=[0, 1])])
    (f,) = diagnosis.diagnose(run).findings
    assert (f.step, f.replica, f.first, f.replicas) == (6, 1, "gradients", [1])
    assert "replica 1 went non-finite first, at step 6: its gradient norm (while its loss was finite)" in f.message
    assert "did not climb" in f.message  # steady norms: a sudden jump, the batch is suspect
    # Under mixed precision a non-finite scaled gradient is a step the loss scale skips: not evidence.
    mixed = _run(tmp_path, [*steps, *_failed(7, first="loss", replica=0, worker=0, replicas=[0, 1])], mixed=True,
                 name="mixed")
    assert diagnosis.diagnose(mixed).findings[0].step == 7


def test_the_checkpoint_is_the_one_really_in_the_folder(tmp_path):
    steps = [_step(n, (1.0, 1.0)) for n in range(1, 5)]
    run = _run(tmp_path, [*steps, *_failed(5, first="weights", checkpoint="/elsewhere/checkpoints/ckpt-4")])
    (f,) = diagnosis.diagnose(run).findings
    assert f.checkpoint is None  # recorded, but its files are not here
    (run / CHECKPOINT_DIR).mkdir()
    (run / CHECKPOINT_DIR / "ckpt-4.index").write_bytes(b"")
    (f,) = diagnosis.diagnose(run).findings
    assert f.checkpoint == str(run / CHECKPOINT_DIR / "ckpt-4") and f.first == "weights" and f.replica is None
    assert f.message.startswith("the weights became NaN or infinite by step 5") and str(run) in f.message
    assert "resume from it with a lower rate" in f.message  # the norms did not climb before it
    climbing = _run(tmp_path, [*[_step(n, (10.0 ** n, 1.0)) for n in range(1, 5)],
                               *_failed(5, first="loss", replica=0, replicas=[0], checkpoint="ckpt-4")], name="climb")
    (climbing / CHECKPOINT_DIR).mkdir()
    (climbing / CHECKPOINT_DIR / "ckpt-4.index").write_bytes(b"")
    (f,) = diagnosis.diagnose(climbing).findings
    assert "is finite but from within the climb (it began at step 1)" in f.message


def test_only_the_last_process_counts(tmp_path):
    run = _run(tmp_path, [_step(1, (1.0, 1.0)), *_failed(2, first="loss", replica=0, replicas=[0]),
                          RunStarted(time=T0 + 9, run_dir="r", config={}, resumed=True), _step(2, (1.0, 1.0)),
                          RunFinished(time=T0 + 10, status="completed", step=2)])
    assert diagnosis.diagnose(run).findings == [] and diagnosis.diagnose(run).status == "completed"


def test_input_bound_from_the_recent_steps_split(tmp_path):
    slow = [_step(n, (1.0, 1.0), input_wait=0.06, step_time=0.1) for n in range(1, 30)]
    (f,) = diagnosis.diagnose(_run(tmp_path, slow)).findings
    assert (f.kind, f.share, f.steps) == ("input_bound", 0.6, 28) and "60%" in f.message
    fast = [_step(n, (1.0, 1.0), input_wait=0.01, step_time=0.1) for n in range(1, 30)]
    assert diagnosis.diagnose(_run(tmp_path, fast, name="fast")).findings == []


@contextlib.contextmanager
def _live(run):
    """The run held as its process holds it: the lock, and process.json naming this process."""
    with run_lock.RunLock(run):
        live_runs.record_process(run, "train", detached=True)
        yield


def test_a_live_run_silent_for_long_is_a_stall_and_a_paused_one_is_not(tmp_path):
    steps = [_step(n, (1.0, 1.0), time=T0 + 0.5 * n) for n in range(1, 21)]  # a group every 0.5 s
    run = _run(tmp_path, steps)
    last = T0 + 10
    assert diagnosis.diagnose(run, now=last + 60).findings == []  # no process holds it: not running
    with _live(run):
        assert diagnosis.diagnose(run, now=last + 4).findings == []  # under the floor
        found = diagnosis.diagnose(run, now=last + 30)
    (f,) = found.findings
    assert found.status == "running"
    assert (f.kind, f.since_step, f.seconds, f.expected_seconds, f.pid) == ("stall", 20, 30.0, 0.5, os.getpid())
    assert f.state == "running"  # this very process, read from /proc
    assert "no step has finished for 30 s since step 20" in f.message
    paused = _run(tmp_path, [*steps, Paused(time=last + 1, step=20)], name="paused")
    with _live(paused):
        assert diagnosis.diagnose(paused, now=last + 300).findings == []


def test_the_validation_after_an_epoch_is_allowed_as_long_as_the_last_one_took(tmp_path):
    epochs = _run(tmp_path, [*[_step(n, (1.0, 1.0), time=T0 + n) for n in range(1, 101)],
                             EpochEnd(time=T0 + 103, epoch=1, step=100),
                             *[_step(n, (1.0, 1.0), time=T0 + n + 3) for n in range(101, 201)]])
    with _live(epochs):
        assert diagnosis.diagnose(epochs, now=T0 + 203 + 14).findings == []  # within 5 x the 3 s validation
        assert [f.kind for f in diagnosis.diagnose(epochs, now=T0 + 203 + 16).findings] == ["stall"]
        # Within an epoch the recent groups set the bar (one a second here): 5 s.
        within = _run(tmp_path, [_step(n, (1.0, 1.0), time=T0 + n) for n in range(1, 51)], name="within")
    with _live(within):
        assert [f.kind for f in diagnosis.diagnose(within, now=T0 + 50 + 6).findings] == ["stall"]
        # The last step of the run: its final evaluation, which nothing here times.
        final = _run(tmp_path, [_step(n, (1.0, 1.0), time=T0 + n) for n in range(1, 401)], name="final")
    with _live(final):
        assert diagnosis.diagnose(final, now=T0 + 400 + 600).findings == []


def test_not_a_run_is_refused(tmp_path):
    with pytest.raises(diagnosis.NotARun, match="is not a run directory"):
        diagnosis.diagnose(tmp_path)


def test_only_the_recent_steps_of_the_last_process_are_read(tmp_path):
    """Read from the end: the last STEP_WINDOW steps, the step before each epoch_end (the time
    between epochs), every other event of the last process, nothing of the process before."""
    events = [_step(1, (1.0, 1.0)), RunStarted(time=T0 + 1, run_dir="r", config={}, resumed=True),
              *[_step(n, (1.0, 1.0)) for n in range(2, 51)], EpochEnd(time=T0 + 51, epoch=1, step=50),
              *[_step(n, (1.0, 1.0)) for n in range(51, 301)]]
    read = diagnosis.recent_events(_run(tmp_path, events))
    steps = [e.step for e in read if isinstance(e, Step)]
    assert steps == [50, *range(301 - diagnosis.STEP_WINDOW, 301)]
    assert isinstance(read[0], RunStarted) and read[0].resumed and sum(isinstance(e, EpochEnd) for e in read) == 1
    assert read[-1].replicas[1].grad_norm == 1.0  # the window's steps with their replicas
