"""What the engine keeps beside ``events.jsonl`` as the run goes, so no reader has to fold the
whole file: the run's history at several resolutions (``history/``,
gui_app/core/history/pyramid.py) and the run list's ``summary.json`` (rundir.summarize_events
reads it and only the lines after the offset it covers).

Both are caches of the events, written after them: a crash loses at most what the next reader
folds again from the events. Neither is ever a reason to stop a run: a write that fails (a full
disk) switches the cache off and the readers fall back on the events.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from gui_app.core import run_summary, rundir
from gui_app.core.events import Event, Step
from gui_app.core.history.pyramid_files import open_writer
from gui_app.core.history.pyramid_writer import PyramidWriter
from gui_app.core.history.status import RunStatus

# "0": no pyramid (summary.json only): the benchmarks' switch for the engine's cost of keeping it
# (benchmarks/bench_long_runs.py --only engine); readers then build it from the events, once.
HISTORY_ENV = "REPLICA_STUDIO_HISTORY"
SUMMARY_EVERY_S = 10.0  # during steps (a rename costs ms here); any other event that changes the status: at once


class RunRecords:
    """The pyramid and summary of one run directory, fed each event with its line's offsets."""

    def __init__(self, run_dir: str | Path, inode: int) -> None:
        self.run_dir = Path(run_dir)
        self._inode = inode
        self._pyramid: PyramidWriter | None = None
        try:
            if os.environ.get(HISTORY_ENV) != "0":
                self._pyramid = open_writer(self.run_dir, self.run_dir / rundir.EVENTS_FILE)
        except (OSError, ValueError):  # the run goes on; readers fold the events themselves
            self._pyramid = None
        self._status: RunStatus = rundir.summarize_events(self.run_dir)  # the lines written before
        self._end = 0
        self._written = 0.0  # when summary.json was last written (monotonic)

    def replaced(self, inode: int) -> None:
        """A resumed run replaced the events file by its lines up to the checkpoint (the pyramid
        cuts itself when its run_started comes): offsets of the old file mean nothing now."""
        self._inode = inode
        if self._pyramid is not None:
            self._pyramid.meta.inode = inode
            self._pyramid.bucket_offsets.clear()
            self._pyramid.counted_to = 0

    def add(self, event: Event, start: int, end: int) -> None:
        self._end = end
        if self._pyramid is not None:
            try:
                self._pyramid.add(event, start, end)
            except (OSError, ValueError):
                self._drop_pyramid()
        changed = self._status.add(event)
        now = time.monotonic()
        if (changed and not isinstance(event, Step)) or now - self._written >= SUMMARY_EVERY_S:
            self._write_summary(now)

    def flush(self) -> None:
        """Write both as they stand (at checkpoints and at the end of the run)."""
        if self._pyramid is not None:
            self._pyramid.write_meta()
        self._write_summary(time.monotonic())

    def close(self) -> None:
        self.flush()
        if self._pyramid is not None:
            self._pyramid.close()
            self._pyramid = None

    def _write_summary(self, now: float) -> None:
        self._written = now
        if self._end:
            run_summary.write_summary(self.run_dir, self._status, self._end, self._inode)

    def _drop_pyramid(self) -> None:
        pyramid, self._pyramid = self._pyramid, None
        if pyramid is not None:
            try:
                pyramid.close()
            except OSError:
                pass
