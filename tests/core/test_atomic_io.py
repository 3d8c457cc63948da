"""Atomic, durable writes: whole or not at all, fsynced before and after the rename."""
from __future__ import annotations

import os

import pytest

from gui_app.core import atomic_io


def test_written_whole_and_fsynced(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    atomic_io.write_text(tmp_path / "eval.json", "{}")
    assert (tmp_path / "eval.json").read_text() == "{}"
    assert synced[0].startswith(str(tmp_path / ".eval.json.")) and synced[-1] == str(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    (tmp_path / "config.json").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_io.atomic_path(tmp_path / "config.json") as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk full, say")
    assert (tmp_path / "config.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]
