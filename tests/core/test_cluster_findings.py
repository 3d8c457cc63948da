"""The cluster findings' rules on synthetic events: a ``stall`` event becomes ``diagnose``'s and the
window's stall finding until it clears; the straggler is the worker that arrives at the all-reduce
last, by a share of the step, in most recent steps -- one hiccup is not one -- and its cause."""
from __future__ import annotations

import random

from gui_app.core import finding_rules
from gui_app.core.events import ReplicaStats, RunStarted, Stall, StallCleared, Step, WorkerStatus
from gui_app.core.history.findings import RunFindings


def _step(n: int, ready: list[float], compute: list[float], step_time: float = 0.1) -> Step:
    """Step ``n`` of a cluster of one replica per worker; ``ready``/``compute`` in seconds."""
    replicas = [ReplicaStats(replica=w, worker=w, step_time=c, ready_time=r)
                for w, (r, c) in enumerate(zip(ready, compute))]
    return Step(step=n, time=1000.0 + n * step_time, step_time=step_time, replicas=replicas)


def _steps(count: int, late: dict[int, tuple[float, float]] | None = None, workers: int = 2) -> list[Step]:
    """``count`` steps of ``workers`` arriving within 2 ms of each other at 40 ms, except worker
    ``w`` at step ``n`` when ``late[n] = (extra input, extra compute)`` for worker 1."""
    rng = random.Random(1)
    out = []
    for n in range(1, count + 1):
        compute = [0.03 + rng.uniform(0, 0.002) for _ in range(workers)]
        ready = [c + 0.01 for c in compute]
        extra_input, extra_compute = (late or {}).get(n, (0.0, 0.0))
        compute[1] += extra_compute
        ready[1] += extra_compute + extra_input
        out.append(_step(n, ready, compute))
    return out


def test_a_worker_late_in_most_steps_is_the_straggler_by_its_compute():
    events = _steps(40, {n: (0.0, 0.03) for n in range(1, 41)})
    (found,) = finding_rules.straggler(events)
    assert (found.kind, found.worker, found.replica, found.cause) == ("straggler", 1, 1, "compute")
    assert 27 <= found.late_ms <= 33 and 0.27 <= found.share <= 0.33 and found.steps == 39
    assert "worker 1 (replica 1) is the straggler" in found.message and "forward and backward" in found.message


def test_a_late_batch_is_named_input():
    events = _steps(40, {n: (0.02, 0.0) for n in range(1, 41)})
    (found,) = finding_rules.straggler(events)
    assert found.worker == 1 and found.cause == "input" and "for its batch" in found.message


def test_one_hiccup_or_a_small_lead_is_no_straggler():
    assert finding_rules.straggler(_steps(40, {30: (0.0, 0.2), 31: (0.0, 0.2)})) == []
    assert finding_rules.straggler(_steps(40, {n: (0.0, 0.005) for n in range(1, 41)})) == []  # 5 % of a step
    assert finding_rules.straggler(_steps(15, {n: (0.0, 0.03) for n in range(1, 16)})) == []  # too few steps
    single = [_step(n, [0.04], [0.03]) for n in range(1, 41)]
    assert finding_rules.straggler(single) == []  # one worker: nobody to wait for


def _stall(worker: int | None = 1, state: str = "stopped") -> Stall:
    return Stall(time=2000.0, worker=worker, reason="its process is stopped (T (stopped))", since_step=40,
                 seconds=3.2, expected_seconds=0.05,
                 workers=[WorkerStatus(worker=0, phase="training", last_step=40, stack=["loop.py:180 train"]),
                          WorkerStatus(worker=1, state=state, os_state="T (stopped)", phase="training",
                                       last_step=40, pid=4321)])


def test_a_stall_event_is_the_stall_finding_until_steps_flow_again():
    (found,) = finding_rules.cluster_stall([*_steps(3), _stall()])
    assert (found.kind, found.worker, found.since_step, found.pid, found.state) == ("stall", 1, 40, 4321, "stopped")
    assert [w["phase"] for w in found.workers] == ["training", "training"]
    assert found.workers[0]["stack"] == ["loop.py:180 train"]
    assert found.message == (
        "no step has finished for 3 s since step 40 (a step group took 50 ms recently); worker 1 holds the others "
        "up: its process is stopped (T (stopped)) (SIGSTOP, Ctrl+Z or a debugger): continue it with kill -CONT "
        "4321. Workers: worker 0 running, training after step 40; worker 1 stopped, training after step 40.")
    assert finding_rules.cluster_stall([_stall(), StallCleared(step=41, seconds=3.5)]) == []
    assert finding_rules.cluster_stall([_stall(), *_steps(1)]) == []


def test_the_window_shows_the_stall_event_and_the_clock_rule_leaves_it_be():
    findings = RunFindings()
    findings.add(RunStarted(run_dir="/nowhere", config={}, total_steps=100, time=999.0))
    for event in _steps(30, {n: (0.0, 0.03) for n in range(1, 31)}):
        findings.add(event)
    assert [f.kind for f in findings.findings] == ["straggler"]
    assert findings.add(_stall())
    assert [f.kind for f in findings.findings] == ["stall", "straggler"] and findings.stall.worker == 1
    # The clock rule, asked for the launcher's process, would say "alive": the event's figures stay.
    assert not findings.check_stall(3000.0, 99, lambda: "sleeping")
    assert findings.stall.workers is not None
    assert findings.add(StallCleared(step=41, seconds=3.5, time=2004.0))
    assert findings.stall is None
