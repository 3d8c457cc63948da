"""The run model (gui_app.core.history): one fold of a run's events into what every view shows,
what each batch changed, its subscribers, and a run read from its folder (gui_app.core.rundir)."""
from __future__ import annotations

import gc
import json
import math
import weakref

import numpy as np
import pytest

from gui_app.core import events as ev
from gui_app.core import rundir
from gui_app.core.config import RunConfig
from gui_app.core.history import Part, RunHistory
from gui_app.core.history.buffers import PENDING_ROWS, GrowableArray, number
from gui_app.core.history.status import RunStatus


def started(start_step: int = 0, resumed: bool = False, run_dir: str = "/runs/a") -> ev.RunStarted:
    return ev.RunStarted(run_dir=run_dir, config={}, resumed=resumed, start_step=start_step, total_steps=40,
                         epochs=2, num_replicas=2, time=100.0 + start_step,
                         replicas=[ev.ReplicaInfo(replica=r, device=f"/device:CPU:{r}") for r in range(2)])


def step(n: int, loss: float = 1.0, wait: float | None = None) -> ev.Step:
    return ev.Step(step=n, epoch=1 + (n - 1) // 20, loss=loss, accuracy=0.5, learning_rate=0.1, time=100.0 + n,
                   examples_per_sec=640.0, step_time=0.1, input_wait=wait,
                   replicas=[ev.ReplicaStats(replica=r, loss=loss + r, grad_norm=1.0, step_time=0.05 + 0.01 * r,
                                             examples=32, examples_per_sec=320.0) for r in range(2)])


def evaluation(accuracy: float = 0.9) -> ev.Eval:
    return ev.Eval(loss=0.3, accuracy=accuracy, examples=10, confusion_matrix=[[5, 0], [1, 4]], class_names=["a", "b"])


def test_one_batch_is_folded_once_and_says_what_it_changed():
    history = RunHistory()
    # the replicas' devices; the findings start again with a run's process
    assert history.add([started()]) == Part.RUN | Part.REPLICAS | Part.PROGRESS | Part.FINDINGS
    assert history.add([step(1), step(2)]) == Part.TRAINING | Part.REPLICAS | Part.TIMING | Part.PROGRESS
    assert history.add([ev.Checkpoint(step=2), ev.Paused(step=2), ev.Warning(message="x")]) == 0
    assert history.add([ev.EpochEnd(epoch=1, step=2, val_loss=None, val_accuracy=None)]) == 0  # nothing to draw
    assert history.add([ev.EpochEnd(epoch=1, step=2, val_loss=0.7, val_accuracy=0.6)]) == Part.TRAINING
    assert history.add([evaluation()]) == Part.EVALUATION | Part.PROGRESS
    assert history.training.steps.column(0).tolist() == [1.0, 2.0]
    assert history.replicas.metrics["loss"].data.tolist() == [[1.0, 2.0], [1.0, 2.0]]
    assert history.timing.shares() == pytest.approx((0.6, 0.0, 0.4))  # the slowest replica: 0.06 of 0.1 s
    assert history.evaluation.accuracy == 0.9 and history.run_dir == "/runs/a"


def test_subscribers_hear_each_changed_batch_and_do_not_keep_a_view_alive():
    history = RunHistory()
    heard: list[int] = []

    class View:
        def changed(self, parts: int) -> None:
            heard.append(parts)

    view = View()
    history.subscribe(view.changed)
    history.add([step(1)])
    history.add([ev.Checkpoint(step=1)])  # nothing changed: nothing said
    assert heard == [Part.TRAINING | Part.REPLICAS | Part.TIMING | Part.PROGRESS]
    history.unsubscribe(view.changed)
    history.add([step(2)])
    assert len(heard) == 1
    history.subscribe(view.changed)
    alive = weakref.ref(view)
    del view
    gc.collect()
    assert alive() is None  # held weakly: a closed view and its history form no cycle
    history.add([step(3)])  # and a dead one is skipped
    assert len(heard) == 1
    alive = weakref.ref(history)
    del history
    assert alive() is None  # no cycle of its own either: freed without the garbage collector


def test_a_resumed_run_continues_from_its_checkpoint_and_replayed_steps_replace_old_ones():
    history = RunHistory()
    history.add([started()] + [step(n) for n in range(1, 11)])
    changed = history.add([started(start_step=6, resumed=True)])
    assert changed & Part.TRAINING and changed & Part.REPLICAS  # the points after the checkpoint went
    history.add([step(n, loss=5.0) for n in range(7, 13)])
    assert history.training.steps.column(0).tolist() == list(range(1, 13))
    assert history.replicas.steps.column(0).tolist() == list(range(1, 13))
    assert history.training.steps.data[6:, 1].tolist() == [5.0] * 6
    history.add([step(12, loss=9.0)])  # a replayed step
    assert len(history.training.steps) == 12 and history.training.steps.last(1) == 9.0
    assert history.timing.steps() == 17  # a resumed run keeps its recent timings (10 + 6 + 1)
    history.add([started()])  # a new run (not resumed) starts its timings afresh
    assert history.timing.steps() == 0


def test_the_status_is_the_run_lists_fold():
    status = RunStatus()
    for event in (started(), step(1), step(2)):
        status.add(event)
    assert (status.status, status.step, status.total_steps, status.started) == ("interrupted", 2, 40, 100.0)
    status.add(ev.RunFinished(status="failed", step=2, message="worker 1 lost", resumable=True))
    assert (status.status, status.message, status.cluster_resumable) == ("failed", "worker 1 lost", True)
    status.add(started(start_step=2, resumed=True))  # resumed: running (on disk: interrupted) again
    assert (status.status, status.message, status.cluster_resumable, status.started) == (
        "interrupted", None, False, 100.0)
    status.add(evaluation(0.75))
    status.add(ev.RunFinished(status="completed", step=40))
    assert (status.status, status.step, status.test_accuracy) == ("completed", 40, 0.75)


def test_the_progress_line_follows_the_latest_news_and_the_recent_speed():
    history = RunHistory()
    assert history.progress.latest == ""
    history.add([ev.Progress(stage="decode", what="images", done=10, total=40)])
    assert history.progress.latest == "stage" and history.progress.stage.share() == 0.25
    history.add([started()])
    assert (history.progress.latest, history.progress.total_steps) == ("started", 40)
    history.add([step(n) for n in range(1, 31)])  # a step a second
    assert (history.progress.latest, history.progress.step, history.progress.epoch) == ("step", 30, 2)
    assert history.progress.eta_seconds() == pytest.approx(10.0)  # 10 steps left
    history.add([evaluation()])
    assert history.progress.latest == "evaluated"


def test_gpus_and_where_the_replicas_run():
    from gui_app.core.gpu_monitor import GpuSample

    sample = GpuSample(index=1, name="A100", utilization=80.0, memory_used=1, memory_total=2, temperature=None,
                       power=None)
    history = RunHistory()
    run = started()
    run.replicas = [ev.ReplicaInfo(replica=0, device="/job:localhost/replica:0/task:0/device:GPU:1")]
    history.add([run, step(1)])
    assert history.gpus.indices == []
    with_gpus = step(2)
    with_gpus.gpus = [sample]
    assert history.add([with_gpus]) & Part.GPUS
    assert history.gpus.placement() == {1: [0]} and history.gpus.utilization.data.tolist() == [[80.0]]


def test_number_and_buffers():
    assert [number(v) for v in (1, 2.5, None, True, "x")][:2] == [1.0, 2.5]
    assert all(math.isnan(number(v)) for v in (None, True, "x", math.inf, -math.inf, math.nan))
    assert number(np.float64(0.5)) == 0.5
    buf = GrowableArray(2, capacity=2)
    for i in range(3 * PENDING_ROWS + 5):
        buf.append((i, -i))
    assert len(buf._pending) < PENDING_ROWS  # rows nobody reads go into the array in blocks
    assert len(buf) == 3 * PENDING_ROWS + 5 and buf.last(1) == -(3 * PENDING_ROWS + 4)
    assert buf.column(0)[-1] == 3 * PENDING_ROWS + 4 and not buf._pending


def _run_dir(tmp_path, events: list[ev.Event]):
    RunConfig().save(tmp_path / rundir.CONFIG_FILE)
    (tmp_path / rundir.EVENTS_FILE).write_text("".join(json.dumps(ev.encode(e)) + "\n" for e in events))
    return tmp_path


def test_a_run_folder_reads_as_one_history(tmp_path):
    run = _run_dir(tmp_path, [started(run_dir="elsewhere")] + [step(n) for n in range(1, 6)] + [evaluation(0.8)])
    with (run / rundir.EVENTS_FILE).open("a") as f:
        f.write('{"type": "step", "step": 3, "loss": 7.0}\n')  # replayed by a resume
        f.write('{"type": "mystery"}\nnot json\n{"type": "step", "st')  # another program's line, a torn one
    events = rundir.read_events(run)
    assert [e.step for e in events if isinstance(e, ev.Step)] == [1, 2, 4, 5, 3]  # the last written of each
    history = rundir.read_history(run)
    assert history.run_dir == str(run)  # where it is now, not where it was written
    assert history.evaluation.accuracy == 0.8 and history.evaluation_source == ""
    (run / rundir.EVAL_FILE).write_text(json.dumps({"accuracy": 0.85, "confusion_matrix": [[1]]}))
    history = rundir.read_history(run)  # eval.json is the run's last evaluation
    assert history.evaluation.accuracy == 0.85 and history.evaluation_source == str(run / rundir.EVAL_FILE)
    (run / rundir.EVAL_FILE).write_text("[1, 2]")
    history = rundir.read_history(run)
    assert history.problems == [f"{run / rundir.EVAL_FILE}: expected a JSON object"]
    assert history.evaluation.accuracy == 0.8  # the event's, then


def test_the_run_list_decodes_only_what_it_needs_and_rebuilds_an_old_cache(tmp_path):
    line = json.loads(json.dumps(ev.encode(step(7))))
    shallow = ev.decode(line, parts=False)
    assert shallow.replicas == [] and shallow.step == 7 and shallow.loss == 1.0
    run = _run_dir(tmp_path, [started(), step(1), step(2), ev.RunFinished(status="stopped", step=2)])
    old = {"status": "completed", "started": 1.0, "step": 99, "total_steps": 99, "test_accuracy": None,
           "message": None, "cluster_resumable": False}
    (run / rundir.SUMMARY_FILE).write_text(json.dumps({"version": 2, "offset": 10, "state": old}))
    info = rundir.read_run(run)
    assert (info.status, info.step, info.total_steps) == ("stopped", 2, 40)
    assert json.loads((run / rundir.SUMMARY_FILE).read_text())["version"] == 4
