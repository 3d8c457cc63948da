"""Disk checks for a run: refuse to start where nothing can be saved, and name a full disk as
such (TensorFlow reports ENOSPC from its savers as ``ResourceExhaustedError``, which reads
like "out of memory"). TensorFlow-free.
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

MARGIN_BYTES = 1 << 20  # events, eval.json, TensorBoard summaries of the first steps


class DiskError(ValueError):
    """The runs folder cannot take the run: bad input, exit code 2."""


def require_writable(folder: str | Path) -> None:
    """Raise :class:`DiskError` unless a file can be created in ``folder`` (made if missing)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        with open(probe, "wb") as f:
            f.write(b"x")
        probe.unlink()
    except FileExistsError:  # mkdir found something that is not a folder
        raise DiskError(f"--runs-dir: {folder} is a file, not a folder") from None
    except OSError as exc:
        raise DiskError(f"--runs-dir: cannot write in {folder}: {exc.strerror or exc}") from None


def free_bytes(folder: str | Path) -> int:
    return shutil.disk_usage(folder).free


def require_free(folder: str | Path, need: int, what: str) -> None:
    """Raise :class:`DiskError` when ``folder``'s disk has less than ``need`` bytes free."""
    free = free_bytes(folder)
    if free < need:
        raise DiskError(f"the disk holding {folder} has {_mib(free)} free but {what} needs about {_mib(need)}; "
                        "free some space or choose another runs folder")


def is_disk_full(exc: BaseException) -> bool:
    """ENOSPC/EDQUOT from Python, or TensorFlow's wording of it (any exception type)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        return True
    text = str(exc)
    return "No space left on device" in text or "Disk quota exceeded" in text


def disk_full_message(run_dir: str | Path | None) -> str:
    where = run_dir if run_dir is not None else "the runs folder"
    return (f"the disk holding {where} is full; earlier checkpoints are kept: free some space, "
            "then resume the run")


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"
