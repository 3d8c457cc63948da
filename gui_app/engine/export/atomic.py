"""Atomic exports: an export appears at its destination whole, or not at all.

The file or folder is written under a temporary name beside the destination
(core/atomic_io.py), checked there, and renamed into place by :meth:`AtomicDestination.commit`.
Leaving the ``with`` block without a commit -- an error, a failed parity check, a cancel,
Ctrl+C -- deletes the temporary.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from gui_app.core.atomic_io import discard, fsync_dir, fsync_file, replace_durably, temp_name
from gui_app.core.file_kinds import SAVED_MODEL_FILE
from gui_app.core.formats import ExportError


class AtomicDestination:
    """``with AtomicDestination(dest, directory) as out: write(out.temp); out.commit()``.

    Entering creates the temporary at once, so an unwritable or missing folder is reported
    before any slow work. An existing file is replaced; an existing folder only when it is a
    SavedModel (we never delete a folder of the user's that we did not write).
    """

    def __init__(self, dest: str | Path, directory: bool = False) -> None:
        self.dest = Path(dest).expanduser().absolute()
        self.directory = directory
        self.temp = temp_name(self.dest)
        self._committed = False

    def __enter__(self) -> AtomicDestination:
        dest, parent = self.dest, self.dest.parent
        if not parent.exists():
            raise ExportError(f"{parent}: no such folder")
        if not parent.is_dir():
            raise ExportError(f"{parent}: not a folder")
        if self.directory and dest.exists() and not (dest / SAVED_MODEL_FILE).is_file():
            raise ExportError(f"{dest}: already exists and is not a SavedModel folder; choose a new folder name")
        if not self.directory and dest.is_dir():
            raise ExportError(f"{dest}: is a folder; give a file name")
        # Not mkstemp/mkdtemp: they create private 0600/0700 entries, and an export is an
        # ordinary file (mode from the umask).
        try:
            if self.directory:
                os.mkdir(self.temp, 0o777)
            else:
                os.close(os.open(self.temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except OSError as exc:
            raise ExportError(f"{parent}: cannot write there ({exc.strerror or exc})") from None
        return self

    def commit(self) -> None:
        """Rename the temporary into place, replacing what was there."""
        try:
            if self.directory and self.dest.exists():
                self._swap_folder()
            else:
                replace_durably(self.temp, self.dest)
        except OSError as exc:
            raise ExportError(f"{self.dest}: cannot write there ({exc.strerror or exc})") from None
        self._committed = True

    def _swap_folder(self) -> None:
        """A folder cannot be renamed over another: move the old one aside, then remove it."""
        fsync_file(self.temp)  # the data reaches the disk before the name does
        old = Path(tempfile.mkdtemp(prefix=f".{self.dest.name}.", suffix=".old", dir=self.dest.parent))
        os.rename(self.dest, old / "previous")
        try:
            os.rename(self.temp, self.dest)
        except OSError:
            os.rename(old / "previous", self.dest)
            raise
        finally:
            shutil.rmtree(old, ignore_errors=True)
        fsync_dir(self.dest.parent)

    def __exit__(self, *exc_info: object) -> None:
        if not self._committed:
            discard(self.temp)
