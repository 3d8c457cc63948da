"""``attach`` from a script: ``--text`` prints what ``train`` prints, and the end of its stdin
detaches only when someone could have ended it -- a terminal's Ctrl+D, a pipe's writer going away
(the window, an ssh session) -- while /dev/null, a file or a closed stdin follow the run to its end,
here and with ``--host`` (docs/detached.md). Real processes, a run faked by its events and its lock.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_shell import Shell
from compared_runs import write_run
from engine_helpers import LineReader

from gui_app.core import events as ev
from gui_app.core.run_lock import RunLock
from gui_app.engine.run.event_writer import format_text


@pytest.fixture
def shell(tmp_path) -> Shell:
    return Shell(tmp_path)


def test_attach_text_prints_what_train_prints_and_the_error(shell, tmp_path):
    run = write_run(tmp_path / "run", 0.01, 1, 0.8, 0.8)
    with (run / "events.jsonl").open("a") as f:  # a resumed process that failed
        f.write(json.dumps(ev.encode(ev.Error(time=1.0, message="out of memory", kind="training"))) + "\n")
    proc = shell("attach", str(run), "--text")
    assert proc.returncode == 0, proc.stderr
    expected = [format_text(e) if not isinstance(e, ev.Error) else f"error: {e.message}"
                for e in map(ev.decode_line, (run / "events.jsonl").read_bytes().splitlines(keepends=True))]
    assert proc.stdout.splitlines() == [line for line in expected if line]
    assert proc.stdout.splitlines()[0].startswith("Training ") and "error: out of memory" in proc.stdout
    assert "step 10: loss" in proc.stdout and "{" not in proc.stdout


def _closed_stdin() -> None:
    os.close(0)


def _unfinished_run(tmp_path: Path) -> tuple[Path, str]:
    """A run whose ``run_finished`` is not written yet, and that line."""
    run = write_run(tmp_path / "run", 0.01, 1, 0.8, 0.8)
    *lines, finished = (run / "events.jsonl").read_text().splitlines(keepends=True)
    (run / "events.jsonl").write_text("".join(lines))
    return run, finished


def _until(lines: queue.Queue, prefix: str, timeout: float = 60) -> None:
    """Read lines until one starts with ``prefix``; AssertionError at the end of output or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no line starting {prefix!r} within {timeout} s") from None
        assert line is not None, f"output ended before a line starting {prefix!r}"
        if line.startswith(prefix):
            return


@pytest.mark.parametrize("stdin", ["devnull", "closed"])
def test_attach_with_an_empty_stdin_follows_the_run_to_its_end(shell, tmp_path, stdin):
    """A script's ``< /dev/null`` (nohup's, a service's) has nobody behind it who could leave: its end
    does not detach."""
    run, finished = _unfinished_run(tmp_path)
    lock = RunLock(run).acquire()  # its process runs it
    proc = shell.popen("attach", str(run), "--text", stdin=subprocess.DEVNULL,
                       preexec_fn=_closed_stdin if stdin == "closed" else None)
    try:
        lines = LineReader(proc.stdout)._lines
        _until(lines, "test: ")  # everything written so far is out, and stdin was read to its end
        assert proc.poll() is None, "attach detached at the end of an empty stdin"
        with (run / "events.jsonl").open("a") as f:
            f.write(finished)
        _until(lines, "run completed at step 10")
        lock.release()  # the run's process ends
        assert proc.wait(timeout=60) == 0
    finally:
        lock.release()
        if proc.poll() is None:
            proc.kill()
    assert proc.stderr is not None and proc.stderr.read() == ""


def test_attach_from_a_pipe_detaches_when_it_ends(shell, tmp_path):
    """The window's and an ssh session's stdin: its end is its writer going away; the run goes on."""
    run, _ = _unfinished_run(tmp_path)
    with RunLock(run):
        proc = shell("attach", str(run), given="")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert "\"run_finished\"" not in proc.stdout


def test_what_the_end_of_stdin_means_by_what_stdin_is(tmp_path, monkeypatch):
    """True: its end detaches; False: read it, then follow to the end; None: never read it."""
    from gui_app.engine.commands.attach import stdin_ends_attachment

    saved = os.dup(0)

    def on_stdin(fd: int) -> bool | None:
        os.dup2(fd, 0)
        os.close(fd)
        return stdin_ends_attachment()

    try:
        read_end, write_end = os.pipe()
        os.close(write_end)
        assert on_stdin(read_end) is True  # the window's, an ssh session's
        assert on_stdin(os.open(os.devnull, os.O_RDONLY)) is False
        (tmp_path / "words").write_text("stop\n")
        assert on_stdin(os.open(tmp_path / "words", os.O_RDONLY)) is False
        terminal, user_side = os.openpty()
        assert on_stdin(user_side) is True  # Ctrl+D there detaches
        monkeypatch.setattr(os, "tcgetpgrp", lambda fd: os.getpgrp() + 1)  # another job has the terminal
        assert stdin_ends_attachment() is None  # reading would stop us (SIGTTIN)
        os.close(terminal)
        os.close(0)
        assert stdin_ends_attachment() is None
    finally:
        os.dup2(saved, 0)
        os.close(saved)


@pytest.mark.parametrize("stdin", ["devnull", "pipe"])
def test_attach_on_a_host_keeps_the_rule_of_an_empty_stdin(shell, tmp_path, stdin):
    """attach --host: an empty stdin here follows the run there to its end, as here; a pipe's end detaches."""
    run, finished = _unfinished_run(tmp_path)
    lock = RunLock(run).acquire()
    proc = shell.popen("attach", str(run), "--text", "--host", "here",
                       stdin=subprocess.DEVNULL if stdin == "devnull" else subprocess.PIPE)
    try:
        if proc.stdin is not None:
            proc.stdin.close()  # the pipe ends at once: the attachment there ends, the run goes on
            assert proc.wait(timeout=60) == 0 and "run completed" not in proc.stdout.read()
            return
        lines = LineReader(proc.stdout)._lines
        _until(lines, "test: ")
        assert proc.poll() is None, "the attachment there ended with an empty stdin here"
        with (run / "events.jsonl").open("a") as f:
            f.write(finished)
        _until(lines, "run completed at step 10")
        lock.release()
        assert proc.wait(timeout=60) == 0
    finally:
        lock.release()
        if proc.poll() is None:
            proc.kill()
    assert " attach " in shell.ssh_log.read_text()  # it went through ssh


if sys.platform != "linux":  # pragma: no cover - fstat, ptys, process groups and flock as Linux has them
    pytestmark = pytest.mark.skip("POSIX stdin and locks")
