"""The run controller and its actions with stand-in step runners: group sizes (cut to about
2 s in one process, fixed in a cluster), stop and pause, epoch summaries, and what each action
makes of the same statistics from a synchronous and a parameter-server step runner."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

import numpy as np
import pytest

from gui_app.engine.run.control import Control
from gui_app.engine.run.event_writer import EventWriter
from gui_app.engine.training.actions.base import Action, StepGroup
from gui_app.engine.training.controller import GROUP_SECONDS, RunController
from gui_app.engine.training.loop import ACCURACY, EXAMPLES, GRAD_NORM, LOSS, STATS, STEP_TIME
from gui_app.engine.training.steps import Row, StepStats

TWO_REPLICAS = [Row(0, 0, "/device:CPU:0"), Row(1, 0, "/device:CPU:1")]


def _stats(k: int, seconds_per_step: float = 0.01, loss: float = 1.0) -> StepStats:
    values = np.zeros((k, 2, len(STATS)), np.float32)
    values[:, :, LOSS], values[:, :, ACCURACY], values[:, :, EXAMPLES] = loss, 0.5, 4
    values[:, :, GRAD_NORM], values[:, :, STEP_TIME] = 2.0, seconds_per_step / 2
    return StepStats(values, [TWO_REPLICAS] * k, seconds_per_step * k, np.full(k, seconds_per_step / 4))


class _Steps:
    """A step runner whose steps take ``seconds_per_step``; it records the group sizes asked."""

    def __init__(self, seconds_per_step: float, fixed: bool, limit: int = 10):
        self.group_limit, self.fixed_groups, self.seconds = limit, fixed, seconds_per_step
        self.sizes, self.epochs, self.closed = [], [], False

    def start_epoch(self, epoch: int, start_batch: int) -> None:
        self.epochs.append((epoch, start_batch))

    def run(self, k: int) -> StepStats:
        self.sizes.append(k)
        return _stats(k, self.seconds, loss=float(len(self.sizes)))

    def close(self) -> None:
        self.closed = True


class _Recorder(Action):
    def __init__(self, control=None, stop_after: int | None = None):
        self.calls, self.control, self.stop_after = [], control, stop_after

    def on_steps(self, group: StepGroup) -> None:
        self.calls.append(("steps", group.first_step, group.last_step, group.epoch))
        if self.stop_after is not None and group.last_step >= self.stop_after:
            self.control.command("stop")

    def on_epoch_end(self, summary) -> None:
        self.calls.append(("epoch_end", summary))

    def on_pause(self, step: int) -> None:
        self.calls.append(("pause", step))

    def on_continue(self, step: int) -> None:
        self.calls.append(("continue", step))

    def on_stop(self, step: int) -> None:
        self.calls.append(("stop", step))


class _Step:
    def __init__(self, done: int = 0):
        self.done = done
        self.finite = True  # the weights, for the checkpoints' quarantine

    def assign_add(self, k: int) -> None:
        self.done += k


def _controller(steps, actions, control=None, steps_per_epoch: int = 25, epochs: int = 2, done: int = 0):
    step = _Step(done)
    ctx = SimpleNamespace(steps_per_epoch=steps_per_epoch, total_steps=steps_per_epoch * epochs,
                          input=SimpleNamespace(validation=lambda strategy: None))
    state = SimpleNamespace(step=step, steps_done=lambda: step.done, schedule=lambda s: np.float32(0.1))
    return RunController(ctx, state, steps, SimpleNamespace(strategy=None), control or Control(), actions), step


def test_a_single_process_cuts_slow_groups_to_about_two_seconds():
    steps = _Steps(seconds_per_step=1.0, fixed=False)
    controller, step = _controller(steps, [_Recorder()])
    assert controller.train() == "completed" and step.done == 50 and steps.closed
    # The first call traces: it is not timed. From the second on, groups take about GROUP_SECONDS.
    assert steps.sizes[:3] == [10, 10, int(GROUP_SECONDS)] and max(steps.sizes[2:]) == int(GROUP_SECONDS)
    assert steps.epochs == [(0, 0), (1, 0)]


def test_a_cluster_keeps_its_group_size_and_ends_groups_at_the_epoch():
    steps = _Steps(seconds_per_step=1.0, fixed=True)
    controller, _ = _controller(steps, [_Recorder()])
    controller.train()
    assert steps.sizes == [10, 10, 5, 10, 10, 5]


def test_epoch_ends_carry_the_mean_of_their_steps_and_a_resume_starts_mid_epoch():
    steps, recorder = _Steps(0.01, fixed=True), _Recorder()
    controller, _ = _controller(steps, [recorder], done=15)
    controller.train()
    assert steps.epochs == [(0, 15), (1, 0)] and steps.sizes == [10, 10, 10, 5]
    ends = [call[1] for call in recorder.calls if call[0] == "epoch_end"]
    assert [(e.epoch, e.step) for e in ends] == [(0, 25), (1, 50)]
    assert ends[0].loss == pytest.approx(1.0) and ends[1].loss == pytest.approx((2 * 10 + 3 * 10 + 4 * 5) / 25)
    assert ends[0].val_loss is None


def test_stop_ends_between_groups_and_pause_waits_for_continue():
    control = Control()
    recorder = _Recorder(control, stop_after=20)
    steps = _Steps(0.01, fixed=True)
    controller, step = _controller(steps, [recorder], control)
    assert controller.train() == "stopped" and step.done == 20 and steps.closed
    assert recorder.calls[-1] == ("stop", 20) and not [c for c in recorder.calls if c[0] == "epoch_end"]

    control, recorder = Control(), _Recorder()
    control.command("pause")
    asked = []

    def wait(timeout):  # the user presses Continue during the second wait
        asked.append(timeout)
        if len(asked) == 2:
            control.command("continue")
        return not control.paused

    control.wait_while_paused = wait
    controller, _ = _controller(_Steps(0.01, fixed=True), [recorder], control, epochs=1)
    controller.train()
    assert recorder.calls[:3] == [("pause", 0), ("continue", 0), ("steps", 0, 10, 0)] and len(asked) == 2


def test_the_nan_guard_names_the_first_bad_step():
    from gui_app.engine.run.failures import TrainingDiverged
    from gui_app.engine.training.actions.nan_guard import NanGuard

    stats = _stats(5)
    stats.values[3, 1, LOSS] = np.inf
    stats.values[4, 0, LOSS] = np.nan
    state = SimpleNamespace(kept_checkpoint=lambda: "no checkpoint was written before it")
    with pytest.raises(TrainingDiverged, match=r"at step 14; .*\(no checkpoint was written before it\)"):
        NanGuard(state).on_steps(StepGroup(stats, 10, 0, np.full(5, 0.1)))
    NanGuard(state).on_steps(StepGroup(_stats(5), 10, 0, np.full(5, 0.1)))


def _told_guard(gradients: bool = True):
    from gui_app.engine.training.actions.nan_guard import NanGuard
    from gui_app.engine.training.actions.run_events import RunEvents

    out = io.StringIO()
    state = SimpleNamespace(kept_checkpoint=lambda: "the last good checkpoint, of step 8 (ckpt-8), is kept",
                            kept_checkpoint_path=lambda: "/runs/r/checkpoints/ckpt-8")
    return NanGuard(state, RunEvents(EventWriter("jsonl", out), _NoGpus()), gradients), out


def test_the_tripped_guard_tells_the_finite_steps_and_what_went_first():
    """Steps 11-15: replica 1's gradient norm is infinite at step 13 while its loss is finite, and
    the loss goes NaN at step 14. Steps 11-12 are told, then where it began: step 13, replica 1,
    its gradients. Under mixed precision the norm is no evidence: the loss at step 14 is."""
    from gui_app.engine.run.failures import TrainingDiverged

    stats = _stats(5)
    stats.values[2, 1, GRAD_NORM] = np.inf
    stats.values[3, :, LOSS] = np.nan
    guard, out = _told_guard()
    with pytest.raises(TrainingDiverged, match=r"at step 14; .*ckpt-8"):
        guard.on_steps(StepGroup(stats, 10, 0, np.full(5, 0.1)))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["type"], e.get("step")) for e in lines] == [("step", 11), ("step", 12), ("non_finite", 13)]
    told = lines[-1]
    assert (told["first"], told["replica"], told["worker"], told["replicas"]) == ("gradients", 1, 0, [1])
    assert told["loss"] == 1.0 and told["grad_norm"] is None and told["checkpoint"] == "/runs/r/checkpoints/ckpt-8"
    guard, out = _told_guard(gradients=False)
    with pytest.raises(TrainingDiverged):
        guard.on_steps(StepGroup(stats, 10, 0, np.full(5, 0.1)))
    told = json.loads(out.getvalue().splitlines()[-1])
    assert (told["step"], told["first"], told["replicas"]) == (14, "loss", [0, 1])


class _NoGpus:
    def latest(self):
        return None

    def replica_memory(self):
        return [(None, None), (None, None)]


def _step_events(stats: StepStats) -> list[dict]:
    from gui_app.engine.training.actions.run_events import RunEvents

    out = io.StringIO()
    RunEvents(EventWriter("jsonl", out), _NoGpus()).on_steps(StepGroup(stats, 4, 1, np.array([0.1, 0.05])))
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_step_events_of_replicas_and_of_parameter_server_workers():
    from gui_app.core.event_schema import event_problems

    sync = _step_events(_stats(2, seconds_per_step=0.2))
    assert [e["step"] for e in sync] == [5, 6] and [e["epoch"] for e in sync] == [2, 2]
    assert sync[1]["learning_rate"] == pytest.approx(0.05) and sync[0]["examples_per_sec"] == pytest.approx(40)
    assert [r["device"] for r in sync[0]["replicas"]] == ["/device:CPU:0", "/device:CPU:1"]
    # 0.2 s: 0.1 the slowest replica's pass, 0.05 the wait for input, the rest the all-reduce.
    assert sync[0]["input_wait"] == pytest.approx(0.05) and sync[0]["allreduce_time"] == pytest.approx(0.05)

    values = _stats(2, seconds_per_step=0.2).values[:, :1]
    ps = _step_events(StepStats(values, [[Row(1, 1, "/job:worker/task:1")], [Row(0, -1, None)]], 0.4,
                                per_worker=True))
    assert [e["per_worker"] for e in ps] == [True, True] and "input_wait" not in ps[0] and "allreduce_time" not in ps[0]
    assert [(e["replicas"][0]["worker"], e["replicas"][0]["device"]) for e in ps] == [(1, "/job:worker/task:1"),
                                                                                     (-1, None)]
    assert ps[0]["examples_per_sec"] == pytest.approx(20)
    assert not [p for e in sync + ps for p in event_problems(e)]


class _Manager:
    def __init__(self):
        self.saved = []

    def save(self, checkpoint_number: int) -> str:
        self.saved.append(checkpoint_number)
        return f"ckpt-{checkpoint_number}"


def _checkpoints(control, every_steps=0, every_minutes=0.0, agreed=False):
    from gui_app.core.config import TrainingConfig
    from gui_app.engine.training.actions.checkpoints import Checkpoints

    step = _Step()
    state = SimpleNamespace(manager=_Manager(), steps_done=lambda: step.done, weights_finite=lambda: step.finite,
                            kept_checkpoint=lambda: "the last good checkpoint, of step 6 (ckpt-6), is kept",
                            kept_checkpoint_path=lambda: "ckpt-6")
    cfg = TrainingConfig(checkpoint_every_steps=every_steps, checkpoint_every_minutes=every_minutes)
    return Checkpoints(state, EventWriter("none"), control, cfg, agreed), step, state.manager


def test_a_state_whose_weights_are_not_finite_is_never_saved():
    """A step whose loss was finite can leave NaN weights: saved, it would rotate the last finite
    checkpoint out and a resume would restore the poison."""
    from gui_app.engine.run.failures import TrainingDiverged

    checkpoints, step, manager = _checkpoints(Control(), every_steps=2)
    step.done = 6
    checkpoints.on_steps(StepGroup(_stats(2), 4, 0, np.full(2, 0.1)))
    step.done, step.finite = 8, False
    with pytest.raises(TrainingDiverged, match=r"weights became NaN or infinite by step 8 .*ckpt-6"):
        checkpoints.on_steps(StepGroup(_stats(2), 6, 0, np.full(2, 0.1)))
    with pytest.raises(TrainingDiverged):
        checkpoints.on_stop(8)
    assert manager.saved == [6]


def test_checkpoints_by_steps_on_request_and_agreed_by_the_clock(monkeypatch):
    control = Control()
    checkpoints, step, manager = _checkpoints(control, every_steps=4)
    for first in (0, 3, 6):  # groups of 3: steps 1-3, 4-6 (crosses 4), 7-9 (crosses 8)
        step.done = first + 3
        checkpoints.on_steps(StepGroup(_stats(3), first, 0, np.full(3, 0.1)))
    assert manager.saved == [6, 9]
    control.command("checkpoint")
    checkpoints.on_steps(StepGroup(_stats(1), 9, 0, np.full(1, 0.1)))
    assert manager.saved == [6, 9, 9] and not control.take_checkpoint_request()

    import gui_app.engine.training.actions.checkpoints as module

    clock = [1000.0]
    monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    for agreed, expected in ((False, [1]), (True, [])):
        control = Control()
        checkpoints, step, manager = _checkpoints(control, every_minutes=1.0, agreed=agreed)
        clock[0] += 61
        step.done = 1
        checkpoints.on_steps(StepGroup(_stats(1), 0, 0, np.full(1, 0.1)))
        assert manager.saved == expected
        # A cluster's worker asks; every worker saves when they agreed on it (engine/cluster/agreement.py).
        assert control.take_checkpoint_request() is agreed
