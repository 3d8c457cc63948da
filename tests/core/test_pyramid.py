"""The run's history at several resolutions (gui_app/core/history/pyramid*.py): kept as the events
are written it equals the one rebuilt from the events; a torn or uncounted tail is cut; a stale
one is caught up from its offset, one of another version or file rebuilt; a resumed run cuts it
as RunHistory cuts its series; and a one-step spike is the max of its bucket at every level."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from pyramid_runs import finished, loss_at, started, step_lines, write_run

from gui_app.core import rundir
from gui_app.core.events import Step, decode_line
from gui_app.core.events_file import EventsFile
from gui_app.core.history.pyramid import BASE, FOLDER, MAX, META_FILE, MIN, Meta, N, level_name, read_level
from gui_app.core.history.pyramid_files import update_pyramid
from gui_app.core.history.pyramid_writer import PyramidWriter
from gui_app.engine.run.records import RunRecords


class _Engine:
    """The engine's way of writing a run: each line appended to events.jsonl, then folded."""

    def __init__(self, run):
        self.run = run
        self.file = EventsFile(run / rundir.EVENTS_FILE)
        self.records = RunRecords(run, self.file.inode())

    def write(self, lines):
        for line in lines:
            start, end = self.file.append(line.encode())
            self.records.add(decode_line(line), start, end)

    def resume(self, step: int, total: int):
        self.file.keep_history_until(step)
        self.records.replaced(self.file.inode())
        self.write([started(total, start_step=step, resumed=True, time=5000.0)])

    def close(self):
        self.records.close()
        self.file.close()


def _levels(run):
    meta = Meta.read(run / FOLDER)
    assert meta is not None
    return meta, {level: read_level(run / FOLDER, level, meta) for level in sorted(meta.counts)}


def _assert_same(a, b, processes=True):
    (meta_a, levels_a), (meta_b, levels_b) = _levels(a), _levels(b)
    assert meta_a.columns == meta_b.columns
    assert {k: v for k, v in meta_a.counts.items() if v} == {k: v for k, v in meta_b.counts.items() if v}
    assert (meta_a.offset, meta_a.end, meta_a.last_step) == (meta_b.offset, meta_b.end, meta_b.last_step)
    assert meta_a.messages == meta_b.messages
    # A resumed run's file drops the steps its earlier process wrote after the checkpoint; the
    # kept pyramid still counts the time that process worked.
    assert meta_a.processes == meta_b.processes if processes else meta_a.processes[-1] == meta_b.processes[-1]
    assert meta_a.started_at == meta_b.started_at
    for level, records in levels_a.items():
        other = levels_b[level]
        for name in ("first_step", "last_step", "steps", "t0", "t1"):
            assert np.array_equal(records[name], other[name]), (level, name)
        np.testing.assert_allclose(records["stats"], other["stats"], rtol=1e-6, equal_nan=True)


def _rebuilt(run, tmp_path):
    """The pyramid of a copy of ``run``'s events, folded from the start."""
    copy = tmp_path / f"rebuilt-{run.name}"
    copy.mkdir()
    shutil.copy(run / rundir.EVENTS_FILE, copy / rundir.EVENTS_FILE)
    meta = update_pyramid(copy, copy / rundir.EVENTS_FILE)
    assert meta is not None and meta.end == (copy / rundir.EVENTS_FILE).stat().st_size
    return copy


def _fresh_run(tmp_path, name="run"):
    run = tmp_path / name
    run.mkdir()
    return run


def test_kept_as_written_equals_rebuilt_from_the_events(tmp_path):
    run = _fresh_run(tmp_path)
    engine = _Engine(run)
    engine.write([started(5000)])
    engine.write(step_lines(1, 5000, epoch_every=700))
    engine.write([finished(5000)])
    engine.close()
    meta, levels = _levels(run)
    assert meta.counts[BASE] == 5000 // 256  # the last bucket (4864..5000) is still open
    assert meta.counts[BASE + 1] == 9 and levels[BASE + 1]["first_step"][0] == 1
    assert levels[BASE]["last_step"][:2].tolist() == [255, 511]
    loss = meta.columns.index("loss")
    first = levels[BASE][0]["stats"][loss]
    assert first[N] == 255 and first[MIN] == pytest.approx(min(loss_at(s) for s in range(1, 256)), rel=1e-6)
    val = meta.columns.index("val_loss")
    assert levels[BASE][2]["stats"][val][N] == 1  # the epoch ending at 700 is in the bucket 512..767
    _assert_same(run, _rebuilt(run, tmp_path))
    summary = json.loads((run / rundir.SUMMARY_FILE).read_text())
    assert summary["state"]["status"] == "completed" and summary["state"]["step"] == 5000
    assert summary["offset"] == (run / rundir.EVENTS_FILE).stat().st_size


def test_a_killed_writer_is_caught_up_from_its_offset(tmp_path):
    run = _fresh_run(tmp_path)
    engine = _Engine(run)
    engine.write([started(3000)])
    engine.write(step_lines(1, 1500))
    engine.file.close()  # killed: the pyramid's meta says where it stopped, the rest is lost
    with open(run / rundir.EVENTS_FILE, "a") as f:  # an old engine went on writing the events only
        f.writelines(step_lines(1501, 3000))
        f.write(finished(3000))
    level_file = run / FOLDER / level_name(BASE)
    inode = level_file.stat().st_ino
    with open(level_file, "ab") as f:
        f.write(b"\x01" * 100)  # a torn record
    meta = update_pyramid(run, run / rundir.EVENTS_FILE)
    assert meta is not None and meta.last_step == 3000
    assert level_file.stat().st_ino == inode  # appended to, not rebuilt
    _assert_same(run, _rebuilt(run, tmp_path))


def test_a_pyramid_of_another_version_or_file_is_rebuilt(tmp_path):
    run = write_run(tmp_path / "run", 1000)
    assert update_pyramid(run, run / rundir.EVENTS_FILE) is not None
    meta_path = run / FOLDER / META_FILE
    value = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**value, "version": 0}))
    assert update_pyramid(run, run / rundir.EVENTS_FILE, write=False) is None  # a reader never uses it
    assert update_pyramid(run, run / rundir.EVENTS_FILE).counts[BASE] == 3
    meta_path.write_text(json.dumps({**value, "inode": value["inode"] + 1}))  # a replaced events file
    assert update_pyramid(run, run / rundir.EVENTS_FILE).inode == (run / rundir.EVENTS_FILE).stat().st_ino
    (run / FOLDER / level_name(BASE)).write_bytes(b"")  # damaged: fewer records than meta counts
    assert update_pyramid(run, run / rundir.EVENTS_FILE, write=False) is None
    assert update_pyramid(run, run / rundir.EVENTS_FILE).counts[BASE] == 3
    _assert_same(run, _rebuilt(run, tmp_path))


@pytest.mark.parametrize("resume_at", [700, 767, 1023, 1100])
def test_a_resumed_run_cuts_the_levels_as_the_history_cuts_its_series(tmp_path, resume_at):
    """Written by the engine (the file replaced at the resume) and rebuilt from an old file that
    holds the steps after the checkpoint twice: both equal the pyramid of the one history."""
    run = _fresh_run(tmp_path)
    engine = _Engine(run)
    engine.write([started(3000)])
    engine.write(step_lines(1, 1700, salt=5.0))  # values the resumed run replaces
    engine.resume(resume_at, 3000)
    engine.write(step_lines(resume_at + 1, 3000))
    engine.close()
    clean = _fresh_run(tmp_path, "clean")
    with open(clean / rundir.EVENTS_FILE, "w") as f:
        f.write(started(3000))
        f.writelines(step_lines(1, resume_at, salt=5.0))
        f.write(started(3000, start_step=resume_at, resumed=True, time=5000.0))
        f.writelines(step_lines(resume_at + 1, 3000))
    clean = _rebuilt(clean, tmp_path)
    _assert_same(run, clean, processes=False)
    old = _fresh_run(tmp_path, "old")  # written before the file was cut at a resume
    with open(old / rundir.EVENTS_FILE, "w") as f:
        f.write(started(3000))
        f.writelines(step_lines(1, 1700, salt=5.0))
        f.write(started(3000, start_step=resume_at, resumed=True, time=5000.0))
        f.writelines(step_lines(resume_at + 1, 3000))
    update_pyramid(old, old / rundir.EVENTS_FILE)
    meta, levels = _levels(old)
    clean_meta, clean_levels = _levels(clean)
    assert meta.counts == clean_meta.counts
    for level, records in levels.items():
        np.testing.assert_allclose(records["stats"], clean_levels[level]["stats"], rtol=1e-6, equal_nan=True)


def test_a_one_step_spike_is_the_max_of_its_bucket_at_every_level(tmp_path):
    spike_step, steps = 123_457, 300_000
    writer = PyramidWriter(tmp_path, inode=1)
    for step in range(1, steps + 1):
        writer.add(Step(step=step, loss=50.0 if step == spike_step else 1.0 + (step % 7) * 0.01,
                        time=float(step)), 0, 0)
    writer.close()
    meta, levels = _levels(tmp_path)
    loss = meta.columns.index("loss")
    assert max(meta.counts) >= 17  # buckets up to 2**17 steps
    for level, records in levels.items():
        holds = np.flatnonzero((records["first_step"] <= spike_step) & (records["last_step"] >= spike_step))
        if not len(holds):  # its bucket at this level is still open (the run's last ones)
            assert spike_step >> (level + 1) == steps >> (level + 1) or spike_step >> level == steps >> level
            continue
        stats = records["stats"][holds[0], loss]
        assert stats[MAX] == 50.0 and stats[MIN] == pytest.approx(1.0)
        others = np.delete(records["stats"][:, loss, MAX], holds[0])
        assert not len(others) or others.max() < 1.1
    total = sum(p.stat().st_size for p in (tmp_path / FOLDER).iterdir())
    assert total < 1_000_000


def test_two_readers_never_write_it_at_once(tmp_path):
    import fcntl
    import os

    run = write_run(tmp_path / "run", 1000)
    (run / FOLDER).mkdir()
    fd = os.open(run / FOLDER / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another reader is building it
    try:
        assert update_pyramid(run, run / rundir.EVENTS_FILE) is None
        assert not list((run / FOLDER).glob("level*.bin"))
    finally:
        os.close(fd)
    assert update_pyramid(run, run / rundir.EVENTS_FILE).counts[BASE] == 3
