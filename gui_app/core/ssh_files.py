"""Files to and from an SSH host: a tar stream over the shared ssh connection.

Not scp: OpenSSH 9's ``scp`` speaks SFTP, and a server without ``Subsystem sftp`` (some turn it
off) refuses every copy while plain commands work -- a copy of preview images then failed the
window's dataset check. A ``tar`` there, reading or writing the command's stdin or stdout, needs
nothing but the login shell and a POSIX tar, rides on the connection every other command uses
(so the host key it verified), and is one transport in both directions.

What comes back is the host's to say: it is unpacked with Python's ``data`` filter (no absolute
paths, no ``..``, no links out of the folder, no devices) and must lie under the one name asked
for, so a host cannot write outside the folder given here.
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

from gui_app.core.hosts import Host
from gui_app.core.ssh import SSH_FAILED, HostError, explain_failure, quote_there, run_shell, ssh_argv


def _last_line(stderr: IO[bytes], code: int) -> str:
    stderr.seek(0)
    lines = [line.strip() for line in stderr.read().decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {code}"


def _failure(host: Host, stderr: IO[bytes], code: int, what: str) -> HostError:
    if code == SSH_FAILED:
        stderr.seek(0)
        return HostError(explain_failure(host, stderr.read().decode("utf-8", "replace")))
    return HostError(f"{host.name}: {what}: {_last_line(stderr, code)}")


def fetch(host: Host, remote_path: str, local_folder: Path) -> None:
    """Copy the file or folder ``remote_path`` there into ``local_folder`` (where it appears by
    its name). HostError with one line when it cannot."""
    parent, name = posixpath.split(remote_path.rstrip("/"))
    what = f"cannot copy {remote_path} back"
    if not name or name in (".", ".."):
        raise HostError(f"{host.name}: {what}: not a file or folder name")
    shell = f"cd {quote_there(parent or '.')} && tar -cf - -- {shlex.quote(name)}"
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(ssh_argv(host, shell), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=stderr, start_new_session=True)
        assert proc.stdout is not None
        problem = None
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as archive:
                for member in archive:
                    if PurePosixPath(member.name).parts[:1] != (name,):
                        raise tarfile.TarError(f"it sent {member.name!r}, which is not inside {name!r}")
                    archive.extract(member, local_folder, filter="data")
        except (tarfile.TarError, OSError) as exc:
            problem = exc
        finally:
            with contextlib.suppress(OSError):
                proc.stdout.close()
            code = proc.wait()
        if code != 0:
            raise _failure(host, stderr, code, what)
        if problem is not None:
            raise HostError(f"{host.name}: {what}: {problem}")


def send(host: Host, local_path: Path, remote_folder: str) -> None:
    """Copy the file or folder ``local_path`` into the folder ``remote_folder`` there (where it
    appears by its name). HostError with one line when it cannot."""
    what = f"cannot copy {local_path} there"
    shell = f"cd {quote_there(remote_folder)} && tar -xf -"
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(ssh_argv(host, shell), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=stderr, start_new_session=True)
        assert proc.stdin is not None
        problem = None
        try:
            with tarfile.open(fileobj=proc.stdin, mode="w|", format=tarfile.PAX_FORMAT) as archive:
                archive.add(local_path, arcname=local_path.name, filter=_anonymous)
        except BrokenPipeError:
            pass  # it ended early: its exit code and stderr say why
        except OSError as exc:  # reading here failed
            problem = exc
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            code = proc.wait()
        if problem is not None:
            raise HostError(f"{host.name}: {what}: {getattr(problem, 'strerror', None) or problem}")
        if code != 0:
            raise _failure(host, stderr, code, what)


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
