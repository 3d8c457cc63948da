"""Atomic writes: an export appears at its destination whole, or not at all.

The file or folder is written under a hidden temporary name in the destination's own
folder (so the final rename never crosses file systems), checked there, and renamed into
place by :meth:`AtomicDestination.commit`. Leaving the ``with`` block without a commit --
an error, a failed parity check, a cancel, Ctrl+C -- deletes the temporary.
"""
from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

from gui_app.core.atomic_io import fsync_dir, fsync_file
from gui_app.core.formats import ExportError
from gui_app.core.rundir import SAVED_MODEL_FILE


class AtomicDestination:
    """``with AtomicDestination(dest, directory) as out: write(out.temp); out.commit()``.

    Entering creates the temporary at once, so an unwritable or missing folder is reported
    before any slow work. An existing file is replaced; an existing folder only when it is a
    SavedModel (we never delete a folder of the user's that we did not write).
    """

    def __init__(self, dest: str | Path, directory: bool = False) -> None:
        self.dest = Path(dest).expanduser().absolute()
        self.directory = directory
        self.temp: Path | None = None
        self.committed = False

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
        # Keep the suffix: model.save() insists on ".keras". Not mkstemp/mkdtemp: they create
        # private 0600/0700 entries, and an export is an ordinary file (mode from the umask).
        temp = parent / f".{dest.name}.{secrets.token_hex(4)}.partial{dest.suffix}"
        try:
            if self.directory:
                os.mkdir(temp, 0o777)
            else:
                os.close(os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            self.temp = temp
        except OSError as exc:
            raise ExportError(f"{parent}: cannot write there ({exc.strerror or exc})") from None
        return self

    def commit(self) -> None:
        """Rename the temporary into place, replacing what was there."""
        assert self.temp is not None, "commit() outside the with block"
        try:
            fsync_file(self.temp)  # the data reaches the disk before the name does
            if self.directory and self.dest.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{self.dest.name}.", suffix=".old", dir=self.dest.parent))
                os.rename(self.dest, old / "previous")
                try:
                    os.rename(self.temp, self.dest)
                except OSError:
                    os.rename(old / "previous", self.dest)
                    raise
                finally:
                    shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(self.temp, self.dest)
            fsync_dir(self.dest.parent)
        except OSError as exc:
            raise ExportError(f"{self.dest}: cannot write there ({exc.strerror or exc})") from None
        self.committed = True

    def discard(self) -> None:
        if self.temp is None or self.committed:
            return
        if self.temp.is_dir():
            shutil.rmtree(self.temp, ignore_errors=True)
        else:
            self.temp.unlink(missing_ok=True)
        self.temp = None

    def __exit__(self, *exc_info) -> None:
        self.discard()
