"""Atomic file writes: a file (or folder) appears at its destination whole, or not at all.

Every writer here -- the engine's run files, the hosts file, downloads, exports
(engine/export/atomic.py) and the run list's cache -- writes under a hidden temporary name beside
the destination (same folder: the rename never crosses file systems) and renames it into place;
whatever fails on the way removes the temporary and leaves the destination as it was.

A rename is atomic but not durable: after a power loss the new name may point at a file whose
data never reached the disk, or the rename itself may be lost. So a durable write fsyncs the
data before the rename and the folder after it (POSIX; on Windows folders cannot be opened and
the second step is skipped). A cache that is rebuilt when lost skips both (``durable=False``).
TensorFlow-free.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from pathlib import Path
from typing import Iterator


def fsync_file(path: str | Path) -> None:
    """Flush ``path``'s data to the disk (a file, or every file under a folder)."""
    path = Path(path)
    if path.is_dir():
        for child in path.rglob("*"):
            if child.is_file() and not child.is_symlink():
                fsync_file(child)
        fsync_dir(path)
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | Path) -> None:
    """Make the entries of folder ``path`` (a rename, a new file) durable."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # Windows: folders cannot be opened; NTFS journals the rename itself
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems (and /proc-like ones) refuse fsync on folders
        pass
    finally:
        os.close(fd)


def replace_durably(temp: str | Path, dest: str | Path) -> None:
    """fsync ``temp`` (file or folder), rename it to ``dest``, fsync ``dest``'s folder."""
    fsync_file(temp)
    os.replace(temp, dest)
    fsync_dir(Path(dest).parent)


def temp_name(dest: str | Path) -> Path:
    """A hidden name beside ``dest`` that keeps its suffix (``model.save`` insists on ``.keras``,
    ``np.savez`` on ``.npz``): ``.<name>.<random>.partial<suffix>``."""
    dest = Path(dest)
    return dest.parent / f".{dest.name}.{secrets.token_hex(4)}.partial{dest.suffix}"


def discard(temp: Path) -> None:
    """Remove a temporary file or folder (nothing when it is not there)."""
    with contextlib.suppress(OSError):
        if temp.is_dir() and not temp.is_symlink():
            shutil.rmtree(temp, ignore_errors=True)
        else:
            temp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_path(dest: str | Path, durable: bool = True) -> Iterator[Path]:
    """``with atomic_path(dest) as tmp: write(tmp)``: ``dest`` appears whole on success;
    on any error the temporary is removed and ``dest`` is left as it was."""
    dest = Path(dest)
    tmp = temp_name(dest)
    try:
        yield tmp
        if durable:
            replace_durably(tmp, dest)
        else:
            os.replace(tmp, dest)
    except BaseException:
        discard(tmp)
        raise


def write_bytes(dest: str | Path, data: bytes, durable: bool = True) -> None:
    with atomic_path(dest, durable) as tmp:
        tmp.write_bytes(data)


def write_text(dest: str | Path, text: str, durable: bool = True) -> None:
    write_bytes(dest, text.encode("utf-8"), durable)
