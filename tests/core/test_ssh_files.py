"""Files to and from a host as a tar stream (gui_app/core/ssh_files.py), with the ssh command
replaced by a local shell: the same tar there, the same stream here, no network."""
from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from gui_app.core import ssh_files
from gui_app.core.ssh import HostError
from gui_app.core.ssh_hosts import Host

HOST = Host("gpu1")


@pytest.fixture(autouse=True)
def local_shell(monkeypatch, tmp_path):
    """``ssh HOST SHELL`` becomes ``sh -c SHELL`` in a home folder of the test's own."""
    home = tmp_path / "there"
    home.mkdir()
    monkeypatch.setattr(ssh_files, "ssh_argv", lambda host, shell: ["sh", "-c", f"cd {home} && {shell}"])
    return home


def test_a_folder_goes_there_and_comes_back_byte_for_byte(local_shell, tmp_path):
    here = tmp_path / "here" / "checkpoints"
    (here / "sub").mkdir(parents=True)
    (here / "ckpt-4.index").write_bytes(os.urandom(1000))
    (here / "sub" / "it's \"odd\".bin").write_bytes(os.urandom(70_000))
    (local_shell / "dest").mkdir()
    ssh_files.send(HOST, here, "dest")
    back = tmp_path / "back"
    back.mkdir()
    ssh_files.fetch(HOST, "dest/checkpoints", back)
    for path in here.rglob("*"):
        if path.is_file():
            copy = back / "checkpoints" / path.relative_to(here)
            assert copy.read_bytes() == path.read_bytes()
    single = tmp_path / "one"
    single.mkdir()
    ssh_files.fetch(HOST, "dest/checkpoints/ckpt-4.index", single)
    assert [p.name for p in single.iterdir()] == ["ckpt-4.index"]


def test_a_missing_file_there_is_the_tar_s_own_line(local_shell, tmp_path):
    (local_shell / "runs").mkdir()
    with pytest.raises(HostError, match=r"^gpu1: cannot copy runs/none\.npz back: tar: .*none\.npz.*"):
        ssh_files.fetch(HOST, "runs/none.npz", tmp_path)
    with pytest.raises(HostError, match=r"^gpu1: cannot copy .* there: "):
        ssh_files.send(HOST, tmp_path, "no/such/folder")


def _archive(*members: tarfile.TarInfo) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for info in members:
            archive.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return out.getvalue()


@pytest.mark.parametrize("python_filter", [True, False], ids=["with-data-filter", "python-before-3.11.4"])
@pytest.mark.parametrize("member", ["../escaped", "/tmp/escaped", "other/file", "asked/../../escaped", "link", "fifo"])
def test_a_host_cannot_write_outside_what_was_asked(monkeypatch, tmp_path, member, python_filter):
    if not python_filter:  # as on Debian 12's system Python: our own checks alone
        monkeypatch.setattr(ssh_files, "_FILTER", {})
    info = tarfile.TarInfo(member)
    if member == "link":
        info = tarfile.TarInfo("asked/link")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    elif member == "fifo":
        info = tarfile.TarInfo("asked/fifo")
        info.type = tarfile.FIFOTYPE
    else:
        info.size = 1
    sent = tmp_path / "sent.tar"
    sent.write_bytes(_archive(tarfile.TarInfo("asked"), info) if member != "other/file" else _archive(info))
    monkeypatch.setattr(ssh_files, "ssh_argv", lambda host, shell: ["cat", str(sent)])
    here = tmp_path / "here"
    here.mkdir()
    with pytest.raises(HostError, match=r"^gpu1: cannot copy asked back: "):
        ssh_files.fetch(HOST, "asked", here)
    assert not (tmp_path / "escaped").exists() and not Path("/tmp/escaped").exists()
    assert not (here / "asked" / "link").exists() and not (here / "asked" / "fifo").exists()
