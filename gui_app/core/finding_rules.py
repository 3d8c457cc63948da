"""The rules of ``replica-studio diagnose``'s findings (docs/diagnose.md), applied to a run's
events alone: what gui_app/core/diagnosis.py reads from a run's folder, and what the window's
run history (gui_app/core/history/findings.py) folds as the events arrive, so that both say the
same finding in the same words.

Qt-free, TensorFlow-free, and free of the run folder's readers (rundir, live_runs): the run
history imports it, and rundir imports the run history.
"""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Callable, NamedTuple

from gui_app.core.answers import Finding
from gui_app.core.bottleneck import CpuShare, input_wait_line
from gui_app.core.event_codec import plain
from gui_app.core.events import (
    Continued,
    EpochEnd,
    Event,
    NonFinite,
    Paused,
    RunStarted,
    Stall,
    StallCleared,
    Step,
)

STEP_WINDOW = 100  # the recent steps read (each finding looks at fewer)
HISTORY_STEPS = 20  # the gradient norms shown before a non-finite step
CLIMB = 100.0  # a norm that grew this many times over that window climbed: the rate
STALL_FACTOR = 5.0  # silent for this many times the recent time between two groups of steps
STALL_FLOOR_SECONDS = 5.0  # and at least this long (a checkpoint)
VALIDATION_SECONDS = 60.0  # allowed after an epoch's last step before the first validation was timed
INPUT_STEPS = 50  # the recent steps the input share is taken over
INPUT_MIN_STEPS = 10
INPUT_SHARE = 0.3  # as the Training tab's input-bound line (gui_app/core/bottleneck.py)
STRAGGLER_STEPS = 40  # the recent steps a straggler is looked for over
STRAGGLER_MIN_STEPS = 20  # with fewer measured steps, none is named: one hiccup is not a finding
STRAGGLER_MOST = 0.75  # late in at least this share of them
STRAGGLER_SHARE = 0.1  # by at least this share of a step (its median)


# ---- non_finite ---------------------------------------------------------------------------------
def non_finite(events: list[Event], started: RunStarted | None,
               kept: Callable[[str | None], str | None]) -> list[Finding]:
    """The ``non_finite`` finding of the run's last ``non_finite`` event (none without one);
    ``kept(recorded)``: the checkpoint the event names as it is in the run's folder now, None
    when it is not there."""
    found = next((e for e in reversed(events) if isinstance(e, NonFinite)), None)
    if found is None:
        return []
    steps = [e for e in events if isinstance(e, Step) and e.step < found.step]
    step, replica, worker, first, replicas = found.step, found.replica, found.worker, found.first, found.replicas
    mixed = bool(((started.config if started else {}).get("training") or {}).get("mixed_precision"))
    if first == "loss" and not mixed:
        # A norm gone non-finite in an earlier group is written as null beside a finite loss: that
        # replica's gradients went first (the guard trips on the loss only).
        earlier = _gradients_first(steps)
        if earlier is not None:
            step, replica, worker, first, replicas = earlier.step, earlier.replica, earlier.worker, "gradients", \
                earlier.replicas
            steps = [e for e in steps if e.step < step]
    norms = _norm_history(steps, replica)
    growth = _growth(norms)
    rate = steps[-1].learning_rate if steps else None
    checkpoint = kept(found.checkpoint)
    finding = Finding("non_finite", "", step=step, worker=worker, replica=replica, first=first,
                      replicas=list(replicas), grad_norms=[[s, n] for s, n in norms],
                      growth=growth, learning_rate=rate, checkpoint=checkpoint, layer=found.layer,
                      layer_part=found.layer_part, examples=found.examples, replayed=found.replayed)
    finding.message = _non_finite_sentence(finding, len(started.replicas) if started else 0)
    replay = replay_sentence(found, started.global_batch_size if started else 0,
                             climbed=growth is not None and growth >= CLIMB)
    if replay:
        finding.message = f"{finding.message[:-1]}; {replay}."
    return [finding]


_PARTS = {"activations": "the output of layer {}", "gradients": "the local gradient of {} (before the all-reduce)",
          "all_reduced_gradients": "the all-reduced gradient of {} (finite on every replica before the sum)",
          "weights": "the weights {} after the update"}


def replay_sentence(found: NonFinite, batch: int, climbed: bool = False) -> str:
    """What the replay of the offending steps found (engine/training/replay.py), in words; ""
    for a run whose guard did not replay (older runs). ``climbed``: the gradient norm climbed
    before it (the rate's doing), so the examples named are where it showed, not its cause."""
    if found.replayed is None:
        return ""
    if not found.replayed:
        return f"no replay named the layer: {found.replay_note}" if found.replay_note else ""
    took = f" in {found.replay_seconds:.1f} s" if found.replay_seconds is not None else ""
    start = f"from {Path(found.checkpoint).name}" if found.checkpoint else "from the initial weights"
    where = _PARTS.get(found.layer_part or "", "{}").format(found.layer) if found.layer else \
        "the loss itself (every layer's output finite)"
    text = f"a replay {start}{took} found {where} non-finite first, at step {found.replay_step}"
    count, examples = found.examples_count or 0, found.examples or []
    if found.layer_part == "weights":
        return f"{text} (every loss of that step was finite: the update overflowed)"
    if found.layer_part == "gradients":
        return f"{text} (every loss of that step was finite: the backward pass overflowed)"
    if found.layer_part == "all_reduced_gradients":
        return f"{text}: the float16 all-reduce overflowed (strategy.all_reduce_dtype float32 would not)"
    if count == 0:
        return f"{text}; no example's loss alone is non-finite there (they blow up together)"
    if batch and count >= batch:
        return f"{text}; every example of that batch has a non-finite loss alone: the weights, not the data"
    named = ", ".join(map(str, examples)) + (f" and {count - len(examples)} more" if count > len(examples) else "")
    which = f"example {named}, by its" if count == 1 else f"examples {named}, by their"
    text = f"{text}; the loss alone is non-finite for {which} index in the training set"
    if climbed:
        return f"{text} (where the climb showed first, not its cause)"
    return f"{text}: look at {'it' if count == 1 else 'them'}, an extreme or mislabelled example"


class _Where(NamedTuple):
    step: int
    replica: int
    worker: int
    replicas: list[int]


def _gradients_first(steps: list[Step]) -> _Where | None:
    """The earliest step of the unbroken run of steps just before the trip whose replica had a
    finite loss but a norm that was not (written as null)."""
    found = None
    for event in reversed(steps):
        bad = [r for r in event.replicas if r.grad_norm is None and r.loss is not None]
        if not bad:
            break
        found = _Where(event.step, bad[0].replica, bad[0].worker, [r.replica for r in bad])
    return found


def _norm_history(steps: list[Step], replica: int | None) -> list[tuple[int, float]]:
    """[(step, gradient norm)] of ``replica`` (every replica's largest when None) over the last
    recorded steps, the finite ones."""
    out = []
    for event in steps[-HISTORY_STEPS:]:
        norms = [r.grad_norm for r in event.replicas if r.grad_norm is not None
                 and (replica is None or r.replica == replica)]
        if norms and math.isfinite(max(norms)):
            out.append((event.step, max(norms)))
    return out


def _growth(norms: list[tuple[int, float]]) -> float | None:
    """How many times the last norm is the smallest one before it; None with fewer than two."""
    if len(norms) < 2:
        return None
    low = min(n for _, n in norms[:-1])
    return norms[-1][1] / low if low > 0 else None


def _climb_start(f: Finding) -> int | None:
    """The step the gradient norm's climb began at (its lowest before the trip), when it climbed."""
    norms = f.grad_norms or []
    if f.growth is None or f.growth < CLIMB or len(norms) < 2:
        return None
    return int(min(norms[:-1], key=lambda p: p[1])[0])


def _checkpoint_step(path: str | None) -> int | None:
    tail = Path(path).name.rsplit("-", 1)[-1] if path else ""
    return int(tail) if tail.isdigit() else None


def _power(x: float) -> str:
    return f"10^{math.floor(math.log10(x))}" if x >= 1000 else f"{x:.0f}"


def _non_finite_sentence(f: Finding, replicas: int) -> str:
    rate = "training.learning_rate" + (f" (it was {f.learning_rate:g})" if f.learning_rate else "")
    what = "loss" if f.first == "loss" else "gradient norm (while its loss was finite)"
    bad = f.replicas or []
    worker = f" on worker {f.worker}" if f.worker else ""
    if f.first == "weights":
        where = f"the weights became NaN or infinite by step {f.step} while the loss was still finite"
    elif replicas > 1 and len(bad) >= replicas:
        where = f"every replica's {what} went non-finite at the same step, {f.step} (no single replica went first)"
    elif len(bad) > 1:
        where = (f"replicas {', '.join(map(str, bad))} went non-finite first, together at step {f.step} "
                 f"(their {what}); replica {f.replica}{worker} is the first of them")
    else:
        where = f"replica {f.replica}{worker} went non-finite first, at step {f.step}: its {what}"
    norms = f.grad_norms or []
    whose = f"replica {f.replica}'s gradient norm" if f.replica is not None else "the largest gradient norm"
    if f.growth is not None and f.growth >= CLIMB:
        low_step, low = min(norms[:-1], key=lambda p: p[1])
        why = (f"{whose} grew {_power(f.growth)}x over {int(norms[-1][0] - low_step)} steps "
               f"({low:.3g} at step {int(low_step)} to {norms[-1][1]:.3g} at step {int(norms[-1][0])}): "
               f"lower {rate}")
    elif len(norms) >= 2:
        why = (f"{whose} did not climb before it ({norms[0][1]:.3g} to {norms[-1][1]:.3g} over the last "
               f"{len(norms)} steps): a sudden jump, so look at that step's batch (an extreme or mislabelled "
               f"example) before lowering {rate}")
    else:
        why = f"it went before a second step was recorded: lower {rate}"
    kept = (f"the last good checkpoint is {f.checkpoint}: resume from it with a lower rate "
            f"(replica-studio resume RUN_DIR --set training.learning_rate=...)" if f.checkpoint else
            "no good checkpoint was kept: train again with a lower rate")
    climb = _climb_start(f)
    saved = _checkpoint_step(f.checkpoint)
    if climb is not None and saved is not None and saved > climb:
        kept = (f"the last good checkpoint, {f.checkpoint}, is finite but from within the climb (it began at step "
                f"{climb}): training again with a lower rate is safer than resuming from it")
    return f"{where}; {why}; {kept}."


# ---- stall --------------------------------------------------------------------------------------
def cluster_stall(events: list[Event]) -> list[Finding]:
    """The ``stall`` finding of a cluster's last ``stall`` event (its launcher's watch,
    engine/cluster/stalls.py) when no ``stall_cleared`` or step came after it."""
    for event in reversed(events):
        if isinstance(event, (StallCleared, Step)):
            return []
        if isinstance(event, Stall):
            who = next((w for w in event.workers if w.worker == event.worker), None)
            return [Finding("stall", stall_sentence(event), worker=event.worker, since_step=event.since_step,
                            seconds=event.seconds, expected_seconds=event.expected_seconds,
                            pid=who.pid if who else None, state=who.state if who else None, reason=event.reason,
                            workers=[plain(w) for w in event.workers])]
    return []


def stall_sentence(event: Stall) -> str:
    """A cluster's stall in words: since when, who holds the others up and why, what to do, and
    what every worker is doing."""
    took = event.expected_seconds or 0.0
    took_text = f"{took:.2f} s" if took >= 0.1 else f"{took * 1000:.0f} ms"
    head = (f"no step has finished for {event.seconds:.0f} s since step {event.since_step} "
            f"(a step group took {took_text} recently)")
    who = next((w for w in event.workers if w.worker == event.worker), None)
    if who is None:
        blame = f"; {event.reason}"
    else:
        where = f" on {who.host}" if who.host else ""
        blame = f"; worker {who.worker}{where} holds the others up: {event.reason}"
        if who.state == "stopped" and who.pid:
            blame += f" (SIGSTOP, Ctrl+Z or a debugger): continue it with kill -CONT {who.pid}"
        elif who.state == "gone":
            blame += ": the cluster cannot go on without it"
    each = "; ".join(f"worker {w.worker} {w.state}" + (f", {w.phase}" if w.phase else "")
                     + (f" after step {w.last_step}" if w.last_step is not None else "") for w in event.workers)
    return f"{head}{blame}. Workers: {each}."


def stall(events: list[Event], now: float, started: RunStarted | None, pid: int,
          state_of: Callable[[], str | None], floor: float = STALL_FLOOR_SECONDS) -> list[Finding]:
    """A live run silent for much longer than its recent groups took; none while it is paused,
    before its first step, or in its final evaluation (after its last step: as long as the test
    set takes, which nothing here measures). ``floor``: the shortest silence that is a stall (the
    window's tests lower it). ``pid``: the run's process; ``state_of()`` its OS state (None:
    unknown), asked only for a stall."""
    steps = [e for e in events if isinstance(e, Step)]
    last_word = next((e for e in reversed(events) if isinstance(e, (Paused, Continued))), None)
    if not steps or isinstance(last_word, Paused) or (started and steps[-1].step >= started.total_steps > 0):
        return []
    written = sorted({e.time for e in steps[-HISTORY_STEPS * 5:]})
    gaps = [b - a for a, b in zip(written, written[1:])]
    expected = statistics.median(gaps) if gaps else (steps[-1].step_time or 0.0)
    silent = now - max(e.time for e in events)
    if silent < max(floor, STALL_FACTOR * expected, _between_epochs(events, started)):
        return []
    state = state_of()
    finding = Finding("stall", "", worker=0, since_step=steps[-1].step, seconds=round(now - steps[-1].time, 1),
                      expected_seconds=round(expected, 3), pid=pid, state=state)
    why = {"stopped": " (SIGSTOP, Ctrl+Z or a debugger): continue it with "
                      f"kill -CONT {pid}"}.get(state or "", "")
    took = f"{expected:.2f} s" if expected >= 0.1 else f"{expected * 1000:.0f} ms"
    finding.message = (f"no step has finished for {finding.seconds:.0f} s since step {finding.since_step} "
                       f"(a group of steps took {took} recently); process {pid} is "
                       f"{state or 'alive'}{why}.")
    return [finding]


def _between_epochs(events: list[Event], started: RunStarted | None) -> float:
    """The allowance when the last step ended an epoch whose ``epoch_end`` has not come: the
    validation and the checkpoint between epochs, :data:`STALL_FACTOR` times the last one (the
    first also traced the evaluation; else :data:`VALIDATION_SECONDS`). 0 within an epoch."""
    last = events[-1] if events else None
    if not (isinstance(last, Step) and started and started.steps_per_epoch
            and last.step % started.steps_per_epoch == 0):
        return 0.0
    seen, before = [], None
    for event in events:
        if isinstance(event, Step):
            before = event
        elif isinstance(event, EpochEnd) and before is not None:
            seen.append(event.time - before.time)
    return STALL_FACTOR * seen[-1] if seen else VALIDATION_SECONDS


# ---- input_bound --------------------------------------------------------------------------------
def input_bound(events: list[Event], started: RunStarted | None) -> list[Finding]:
    """The median share of the recent steps (after the first group, which builds the pipeline)
    that the replicas waited for their batch, when it is large."""
    steps = [e for e in events if isinstance(e, Step) and not e.per_worker]
    first_time = steps[0].time if steps else 0.0
    shares, waits = [], []
    for event in steps[-INPUT_STEPS:]:
        if event.time == first_time or event.input_wait is None or not event.step_time:
            continue
        shares.append(min(1.0, event.input_wait / event.step_time))
        waits.append(event.input_wait)
    if len(shares) < INPUT_MIN_STEPS or statistics.median(shares) < INPUT_SHARE:
        return []
    share = statistics.median(shares)
    cpu = CpuShare.of_run(started) if started else None
    shape = (started.dataset or {}).get("input_shape") if started else None
    return [Finding("input_bound", input_wait_line(share, cpu, shape if isinstance(shape, list) else None),
                    seconds=round(statistics.median(waits), 4), share=round(share, 3), steps=len(shares))]


# ---- straggler ----------------------------------------------------------------------------------
class _Arrival(NamedTuple):
    ready: float  # the worker's latest replica's arrival at the all-reduce, from the step's start
    compute: float  # its slowest replica's forward and backward pass
    replica: int  # that latest replica


def _arrivals(step: Step) -> dict[int, _Arrival]:
    out: dict[int, _Arrival] = {}
    for r in step.replicas:
        if r.ready_time is None:
            continue
        have = out.get(r.worker)
        compute = max(r.step_time or 0.0, have.compute if have else 0.0)
        if have is None or r.ready_time > have.ready:
            out[r.worker] = _Arrival(r.ready_time, compute, r.replica)
        else:
            out[r.worker] = have._replace(compute=compute)
    return out


def straggler(events: list[Event]) -> list[Finding]:
    """The worker that arrives at the all-reduce last, by a large share of the step, in most of
    the recent steps (after the first group, which traces): the one the others wait for. Its
    cause: whichever of its input (arrival minus compute) and its compute exceeds the others' more."""
    steps = [e for e in events if isinstance(e, Step) and not e.per_worker]
    first_time = steps[0].time if steps else 0.0
    # worker -> [(lead, share of the step, input beyond the others', compute beyond theirs, replica)]
    leads: dict[int, list[tuple[float, float, float, float, int]]] = {}
    measured = 0
    for event in steps[-STRAGGLER_STEPS:]:
        arrivals = _arrivals(event)
        if event.time == first_time or len(arrivals) < 2 or not event.step_time:
            continue
        measured += 1
        last = max(arrivals, key=lambda w: arrivals[w].ready)
        others = [a for w, a in arrivals.items() if w != last]
        mine = arrivals[last]
        lead = mine.ready - max(a.ready for a in others)
        d_compute = mine.compute - max(a.compute for a in others)
        d_input = (mine.ready - mine.compute) - max(a.ready - a.compute for a in others)
        leads.setdefault(last, []).append((lead, lead / event.step_time, d_input, d_compute, mine.replica))
    if measured < STRAGGLER_MIN_STEPS or not leads:
        return []
    worker, rows = max(leads.items(), key=lambda kv: len(kv[1]))
    share = statistics.median(r[1] for r in rows)
    if len(rows) < STRAGGLER_MOST * measured or share < STRAGGLER_SHARE:
        return []
    late = statistics.median(r[0] for r in rows)
    d_input, d_compute = statistics.median(r[2] for r in rows), statistics.median(r[3] for r in rows)
    cause = "input" if d_input > d_compute else "compute"
    replica = statistics.mode(r[4] for r in rows)
    what = (f"its forward and backward pass takes {d_compute * 1000:.0f} ms longer than the others': a slower or "
            "busier processor there (another program on its cores, a CPU quota, a throttled GPU)" if cause == "compute"
            else f"it waits {d_input * 1000:.0f} ms longer for its batch than the others: its input pipeline or "
                 "its disk (dataset.cache, more parallel reads on that host)")
    message = (f"worker {worker} (replica {replica}) is the straggler: it arrives at the all-reduce "
               f"{late * 1000:.0f} ms after the others ({share:.0%} of a step) in {len(rows)} of the last {measured} "
               f"steps, and every worker waits for it; {what}.")
    return [Finding("straggler", message, worker=worker, replica=replica, late_ms=round(late * 1000, 1),
                    share=round(share, 3), cause=cause, steps=len(rows))]
