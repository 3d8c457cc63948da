"""A run's control channel (engine/run/control_fifo.py): a named pipe in a 0700 folder, words in,
nobody else in, and a clear answer when no run reads it."""
from __future__ import annotations

import os
import queue
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from gui_app.engine.run.control import Control
from gui_app.engine.run.control_fifo import ChannelError, ControlChannel, NotRunning, fifo_path, send


class _Words(Control):
    """A Control that also hands each word it gets to the test."""

    def __init__(self) -> None:
        super().__init__()
        self.words: queue.Queue[str] = queue.Queue()

    def command(self, word: str, reason: str | None = None) -> None:
        super().command(word, reason)
        if word.strip():
            self.words.put(word.strip())


@pytest.fixture
def channel(tmp_path):
    control = _Words()
    old = os.umask(0)  # the modes must not depend on the user's umask
    try:
        opened = ControlChannel(tmp_path, control).open()
    finally:
        os.umask(old)
    yield opened, control
    opened.close()


def test_words_reach_the_run_and_only_its_owner_can_open_the_channel(channel, tmp_path):
    opened, control = channel
    path = fifo_path(tmp_path)
    assert stat.S_ISFIFO(path.stat().st_mode)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for word in ("pause", "checkpoint", "continue", "stop"):
        send(tmp_path, word)
        assert control.words.get(timeout=10) == word
    assert control.stop_requested and not control.paused and control.take_checkpoint_request()
    with pytest.raises(ChannelError, match="unknown control word 'halt'"):
        send(tmp_path, "halt")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="switching users needs root")
def test_another_user_cannot_write_to_the_channel():
    """In a run directory every user can reach (pytest's own folders are 0700: useless here),
    another user lists the run directory but neither opens the pipe nor lists its folder."""
    run_dir = Path(tempfile.mkdtemp(prefix="rs-channel-", dir="/tmp"))
    try:
        run_dir.chmod(0o755)
        control = _Words()
        opened = ControlChannel(run_dir, control).open()
        try:
            as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            listed = subprocess.run([*as_nobody, "ls", "-a", str(run_dir)], capture_output=True, text=True, timeout=30)
            assert listed.returncode == 0 and ".control" in listed.stdout.split()  # the run directory: readable
            done = subprocess.run([*as_nobody, "sh", "-c", f"echo stop > '{fifo_path(run_dir)}'"],
                                  capture_output=True, text=True, timeout=30)
            assert done.returncode != 0 and "Permission denied" in done.stderr
            listed = subprocess.run([*as_nobody, "ls", str(fifo_path(run_dir).parent)], capture_output=True,
                                    text=True, timeout=30)
            assert listed.returncode != 0 and "Permission denied" in listed.stderr
            fifo_path(run_dir).parent.chmod(0o711)  # even with the folder open, the pipe's own mode keeps it out
            done = subprocess.run([*as_nobody, "sh", "-c", f"echo stop > '{fifo_path(run_dir)}'"],
                                  capture_output=True, text=True, timeout=30)
            assert done.returncode != 0 and "Permission denied" in done.stderr
            assert control.words.empty() and not control.stop_requested
        finally:
            opened.close()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_no_reader_is_not_running(tmp_path):
    with pytest.raises(NotRunning):
        send(tmp_path, "stop")  # no channel at all
    control = _Words()
    opened = ControlChannel(tmp_path, control).open()
    opened.close()
    with pytest.raises(NotRunning):
        send(tmp_path, "stop")  # closed: removed with the process's end
    fifo_path(tmp_path).parent.mkdir(mode=0o700, exist_ok=True)
    os.mkfifo(fifo_path(tmp_path), 0o600)  # a killed process's pipe: nobody reads it
    with pytest.raises(NotRunning):
        send(tmp_path, "stop")
    reopened = ControlChannel(tmp_path, control).open()  # the next process replaces it
    try:
        send(tmp_path, "pause")
        assert control.words.get(timeout=10) == "pause"
    finally:
        reopened.close()
