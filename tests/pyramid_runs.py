"""Synthetic runs for the multi-resolution history's tests: an events file of any length, its
steps' figures a smooth curve with a spike at chosen steps, written as the engine writes them."""
from __future__ import annotations

import json
from pathlib import Path

from gui_app.core import events as ev
from gui_app.core import rundir
from gui_app.core.config import RunConfig

DEVICE = "/job:localhost/replica:0/task:0/device:CPU:{}"


def loss_at(step: int, spikes: dict[int, float] | None = None, salt: float = 0.0) -> float:
    return (spikes or {}).get(step, 2.0 / (1.0 + step / 500.0) + 0.01 * ((step * 7919) % 13) + salt)


def started(total: int, replicas: int = 2, start_step: int = 0, resumed: bool = False, time: float = 1.0) -> str:
    event = ev.RunStarted(run_dir="run", config={}, total_steps=total, num_replicas=replicas, start_step=start_step,
                          resumed=resumed, steps_per_epoch=1000, time=time,
                          replicas=[ev.ReplicaInfo(replica=r, device=DEVICE.format(r)) for r in range(replicas)])
    return json.dumps(ev.encode(event), separators=(",", ":")) + "\n"


def step_lines(first: int, last: int, replicas: int = 2, spikes: dict[int, float] | None = None,
               salt: float = 0.0, epoch_every: int = 1000):
    """The lines of steps ``first..last`` (and an epoch_end after every ``epoch_every``th)."""
    template = ev.encode(ev.Step(step=0, loss=0.0, accuracy=0.5, learning_rate=0.001, examples_per_sec=6400.0,
                                 step_time=0.01, input_wait=0.001,
                                 replicas=[ev.ReplicaStats(replica=r, device=DEVICE.format(r), loss=0.0, accuracy=0.5,
                                                           examples=32, grad_norm=1.0, step_time=0.008,
                                                           examples_per_sec=3200.0) for r in range(replicas)]))
    for step in range(first, last + 1):
        loss = loss_at(step, spikes, salt)
        template["step"], template["time"], template["loss"] = step, 10.0 + step, loss
        template["epoch"] = step // epoch_every
        for r, entry in enumerate(template["replicas"]):
            entry["loss"] = loss + 0.001 * r
        yield json.dumps(template, separators=(",", ":")) + "\n"
        if step % epoch_every == 0:
            end = ev.EpochEnd(epoch=step // epoch_every, step=step, loss=loss, val_loss=loss * 1.1,
                              val_accuracy=0.9, time=10.0 + step)
            yield json.dumps(ev.encode(end), separators=(",", ":")) + "\n"


def finished(step: int, status: str = "completed") -> str:
    return json.dumps(ev.encode(ev.RunFinished(status=status, step=step, time=20.0 + step)),
                      separators=(",", ":")) + "\n"


def write_run(run: Path, steps: int, replicas: int = 2, spikes: dict[int, float] | None = None,
              end: bool = True) -> Path:
    """A run folder of ``steps`` steps (config.json, events.jsonl) as a finished engine leaves it."""
    run.mkdir(parents=True, exist_ok=True)
    RunConfig().save(run / rundir.CONFIG_FILE)
    with open(run / rundir.EVENTS_FILE, "w", encoding="utf-8") as f:
        f.write(started(steps, replicas))
        f.writelines(step_lines(1, steps, replicas, spikes))
        if end:
            f.write(finished(steps))
    return run


def write_long_run(run: Path, steps: int, replicas: int = 2, spikes: dict[int, float] | None = None,
                   warn_at: int | None = None, end: bool = True) -> Path:
    """:func:`write_run` with the pyramid the engine would have kept beside it (each step folded
    as it is written, as the engine does: faster than decoding the file afterwards); ``end``:
    with its run_finished (else as a run that goes on leaves it)."""
    from gui_app.core.events import decode_line
    from gui_app.engine.run.records import RunRecords

    run.mkdir(parents=True, exist_ok=True)
    RunConfig().save(run / rundir.CONFIG_FILE)
    path = run / rundir.EVENTS_FILE
    with open(path, "w", encoding="utf-8") as f:
        records = RunRecords(run, path.stat().st_ino)
        offset = 0

        def write(line: str, event) -> None:
            nonlocal offset
            f.write(line)
            records.add(event, offset, offset + len(line))
            offset += len(line)

        write(started(steps, replicas), decode_line(started(steps, replicas)))
        entries = [ev.ReplicaStats(replica=r, device=DEVICE.format(r), accuracy=0.5, examples=32, grad_norm=1.0,
                                   step_time=0.008, examples_per_sec=3200.0) for r in range(replicas)]
        for line in step_lines(1, steps, replicas, spikes):
            if line.startswith('{"type":"step"'):
                step = int(line[line.index('"step":') + 7:line.index(',', line.index('"step":'))])
                loss = loss_at(step, spikes)
                for r, entry in enumerate(entries):
                    entry.loss = loss + 0.001 * r
                write(line, ev.Step(step=step, loss=loss, accuracy=0.5, learning_rate=0.001, examples_per_sec=6400.0,
                                    step_time=0.01, input_wait=0.001, replicas=entries, time=10.0 + step))
                if step == warn_at:
                    warning = json.dumps(ev.encode(ev.Warning(message=f"slow disk at step {step}", time=10.0 + step)))
                    write(warning + "\n", decode_line(warning))
            else:
                write(line, decode_line(line))
        if end:
            write(finished(steps), decode_line(finished(steps)))
    records.close()
    return run


def resume_replaces(run: Path, checkpoint: int, new_steps: int, replicas: int = 2) -> list[bytes]:
    """What a resume from ``checkpoint`` does to the events file (a new file of its lines up to
    the checkpoint: gui_app/core/events_file.py), then its run_started, ``new_steps`` steps and
    its run_finished, with the pyramid its engine keeps; the lines it appended."""
    from gui_app.core.events_file import EventsFile
    from gui_app.core.history.pyramid_files import update_pyramid

    events = EventsFile(run / rundir.EVENTS_FILE)
    events.keep_history_until(checkpoint)
    total = checkpoint + new_steps
    appended = [line.encode() for line in [started(total, replicas, start_step=checkpoint, resumed=True),
                                           *step_lines(checkpoint + 1, total, replicas), finished(total)]]
    for line in appended:
        events.append(line)
    events.close()
    assert update_pyramid(run, run / rundir.EVENTS_FILE) is not None  # as the resumed engine keeps it
    return appended
