"""Files to and from an SSH host: a tar stream over the shared ssh connection.

Not scp: OpenSSH 9's ``scp`` speaks SFTP, and a server without ``Subsystem sftp`` (some turn it
off) refuses every copy while plain commands work -- a copy of preview images then failed the
window's dataset check. A ``tar`` there, reading or writing the command's stdin or stdout, needs
nothing but the login shell and a POSIX tar, rides on the connection every other command uses
(so the host key it verified), and is one transport in both directions.

What comes back is the host's to say: only plain files and folders under the one name asked for
are unpacked (no absolute path, no ``..``, no link, device or fifo; and Python's own ``data``
filter where this Python has it), so a host cannot write outside the folder given here.
"""
from __future__ import annotations

import contextlib
import posixpath
import shlex
import subprocess
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import IO, Iterator

from gui_app.core.ssh import SSH_FAILED, HostError, explain_failure, quote_there, run_shell, ssh_argv
from gui_app.core.ssh_hosts import Host


class _Refused(tarfile.TarError):
    """The host sent an entry outside what was asked for."""


# Python 3.11.4 and later also have tarfile's own "data" filter: used as a second check where
# it exists (Debian 12's system Python, 3.11.2, has none; 3.12 and 3.13 warn without a filter).
_REFUSALS: tuple[type[Exception], ...] = (_Refused, getattr(tarfile, "FilterError", _Refused))
_FILTER: dict = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


def _checked(member: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    """``member`` when it is a plain file or folder under ``name``: no absolute path, no ``..``,
    no link, device or fifo; its permission bits without set-id and world write."""
    parts = PurePosixPath(member.name).parts
    if parts[:1] != (name,) or ".." in parts or not (member.isfile() or member.isdir()):
        raise _Refused(f"it sent {member.name!r}, which is not a file or folder inside {name!r}")
    member.mode &= 0o755
    return member


def _first_line(stderr: IO[bytes], code: int) -> str:
    """The first line that says what went wrong (GNU tar ends with a line that says only that
    something did)."""
    stderr.seek(0)
    lines = [line.strip() for line in stderr.read().decode("utf-8", "replace").splitlines()
             if line.strip() and "Exiting with failure status" not in line]
    return lines[0] if lines else f"exit code {code}"


@contextlib.contextmanager
def _tar_there(host: Host, shell: str, what: str, sending: bool) -> Iterator[IO[bytes]]:
    """``shell`` there, its stdin (``sending``) or stdout given to the caller's tar stream. On
    the way out: HostError with one line when ssh, the tar there or the stream here failed."""
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(ssh_argv(host, shell), stdin=subprocess.PIPE if sending else subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL if sending else subprocess.PIPE, stderr=stderr,
                                start_new_session=True)
        stream = proc.stdin if sending else proc.stdout
        assert stream is not None
        problem: Exception | None = None
        try:
            yield stream
        except BrokenPipeError:
            pass  # the tar there ended early: its exit code and stderr say why
        except (tarfile.TarError, OSError) as exc:
            problem = exc
        finally:
            with contextlib.suppress(OSError):
                stream.close()
            code = proc.wait()
        if code == SSH_FAILED:
            stderr.seek(0)
            raise HostError(explain_failure(host, stderr.read().decode("utf-8", "replace")))
        # What went wrong first: a refused entry, or a file here that could not be read, is ours to
        # say; otherwise the tar there says why the stream broke (a missing file, a full disk).
        if problem is not None and (sending or code == 0 or isinstance(problem, _REFUSALS)):
            raise HostError(f"{host.name}: {what}: {getattr(problem, 'strerror', None) or problem}")
        if code != 0:
            raise HostError(f"{host.name}: {what}: {_first_line(stderr, code)}")


def fetch(host: Host, remote_path: str, local_folder: Path) -> None:
    """Copy the file or folder ``remote_path`` there into ``local_folder`` (where it appears by
    its name). HostError with one line when it cannot."""
    parent, name = posixpath.split(remote_path.rstrip("/"))
    what = f"cannot copy {remote_path} back"
    if not name or name in (".", ".."):
        raise HostError(f"{host.name}: {what}: not a file or folder name")
    shell = f"cd {quote_there(parent or '.')} && tar -cf - -- {shlex.quote(name)}"
    with _tar_there(host, shell, what, sending=False) as stdout, tarfile.open(fileobj=stdout, mode="r|") as archive:
        for member in archive:
            archive.extract(_checked(member, name), local_folder, **_FILTER)


def send(host: Host, local_path: Path, remote_folder: str) -> None:
    """Copy the file or folder ``local_path`` into the folder ``remote_folder`` there (where it
    appears by its name). HostError with one line when it cannot."""
    shell = f"cd {quote_there(remote_folder)} && tar -xf -"
    with _tar_there(host, shell, f"cannot copy {local_path} there", sending=True) as stdin, \
            tarfile.open(fileobj=stdin, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        archive.add(local_path, arcname=local_path.name, filter=_anonymous)


def _anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """The files become the user's there: no owner of ours travels with them."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


@contextlib.contextmanager
def remote_folders(host: Host, count: int) -> Iterator[list[str]]:
    """``count`` empty folders in a new temporary folder on ``host``, removed afterwards."""
    if count == 0:
        yield []
        return
    top = run_shell(host, 'd=$(mktemp -d) && cd "$d" && mkdir ' + " ".join(map(str, range(count))) + ' && pwd').strip()
    try:
        yield [f"{top}/{i}" for i in range(count)]
    finally:
        with contextlib.suppress(HostError):
            run_shell(host, f"rm -rf {shlex.quote(top)}")
