"""``attach --history``: a long run's history from its pyramid (one ``history`` line), then its
events from where the pyramid ends, then live (gui_app/engine/commands/attach_history.py): the bytes are
bounded whatever the run's length, here and over a real SSH host (tests/ssh_host.py), and the
history folded from them is the one Open shows."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from pyramid_runs import resume_replaces, write_long_run, write_run

from gui_app.core import rundir
from gui_app.core.event_lines import LineDecoder
from gui_app.core.events import encode
from gui_app.core.history import RunHistory
from gui_app.core.history.coarse import long_history
from gui_app.core.history.pyramid import FOLDER, META_FILE
from gui_app.core.history.wire import decode_history
from gui_app.identity import app_command, app_env

STEPS, SPIKE = 40_000, 23_456
MAX_BYTES = 1 << 20  # the bound is 2 MB before the live tail


def _attach(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(app_command("attach", *args, "--control", "none"), capture_output=True, timeout=300,
                          env=env or app_env(), stdin=subprocess.DEVNULL)


def _folded(stdout: bytes) -> tuple[RunHistory, int, int]:
    """The history the window folds from attach --history's output, the byte its events go on
    from, and how many event lines followed the history line."""
    first, *lines = stdout.splitlines()
    head = decode_history(json.loads(first))
    history = long_history(head.view, head.started, head.first_started)
    decoder = LineDecoder()
    if head.started is not None:  # the devices its lean step lines refer to, as RunJob does
        decoder.value(encode(head.started))
    history.add([event for event in map(decoder.line, lines) if event is not None])
    return history, head.offset, len(lines)


def _same_as_open(history: RunHistory, run: Path) -> None:
    opened = rundir.read_history(run)
    assert opened.coarse and history.coarse
    np.testing.assert_array_equal(history.training.steps.data, opened.training.steps.data)
    np.testing.assert_array_equal(history.training.validation.data, opened.training.validation.data)
    np.testing.assert_array_equal(history.replicas.metrics["loss"].data, opened.replicas.metrics["loss"].data)
    np.testing.assert_array_equal(history.timing.history.data, opened.timing.history.data)
    assert (history.status.status, history.status.step, history.status.started) == \
        (opened.status.status, opened.status.step, opened.status.started)
    assert np.nanmax(history.training.steps.data[:, 1]) == 50.0  # the one-step spike, at full zoom-out


def test_a_long_runs_history_comes_from_its_pyramid_and_its_events_go_on_after_it(tmp_path):
    run = write_long_run(tmp_path / "run", STEPS, replicas=4, spikes={SPIKE: 50.0})
    size = (run / rundir.EVENTS_FILE).stat().st_size
    done = _attach(str(run), "--history")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout) < MAX_BYTES and len(done.stdout) < size / 50, (len(done.stdout), size)
    history, offset, after = _folded(done.stdout)
    _same_as_open(history, run)
    # The events after the history are the file's from byte offset on: a re-attachment from
    # there (--from-byte and --from, as the window attaches again after a dropped connection)
    # writes the same lines, and goes on after the lines it is told were read.
    data = (run / rundir.EVENTS_FILE).read_bytes()
    assert data[offset - 1:offset] == b"\n" and data[offset:] == b"".join(done.stdout.splitlines(keepends=True)[1:])
    assert 0 < after < 600
    tail = data[offset:].splitlines(keepends=True)
    again = _attach(str(run), "--from-byte", str(offset), "--from", "5")
    assert again.returncode == 0 and again.stdout == b"".join(tail[5:])
    inside = _attach(str(run), "--from-byte", str(offset + 3))
    assert inside.returncode == 2 and inside.stdout == b"" and "does not start a line" in inside.stderr.decode()


def test_a_reattachment_by_byte_to_a_file_a_resume_replaced_exits_3_without_a_line(tmp_path):
    """The window had the history and N lines after its byte; the run was resumed meanwhile from
    an earlier checkpoint: the byte still starts a line of the new file, but the N lines after it
    are other lines. With the history line's inode, attach says so (3) and writes nothing."""
    run = write_long_run(tmp_path / "run", STEPS, replicas=4)
    done = _attach(str(run), "--history")
    head = decode_history(json.loads(done.stdout.splitlines()[0]))
    after = len(done.stdout.splitlines()) - 1
    assert head.inode == (run / rundir.EVENTS_FILE).stat().st_ino and after > 20
    appended = resume_replaces(run, STEPS - 20, 30, replicas=4)
    data = (run / rundir.EVENTS_FILE).read_bytes()
    assert data[head.offset - 1:head.offset] == b"\n"  # the byte alone does not tell
    blind = _attach(str(run), "--from-byte", str(head.offset), "--from", str(after))
    assert blind.returncode == 0 and blind.stdout.splitlines(keepends=True) != appended  # lines lost
    again = _attach(str(run), "--from-byte", str(head.offset), "--from", str(after), "--inode", str(head.inode))
    assert again.returncode == 3 and again.stdout == b"", again.stderr
    assert again.stderr.decode().strip().splitlines() == [
        f"replica-studio attach: --inode: the events file was replaced since (inode "
        f"{(run / rundir.EVENTS_FILE).stat().st_ino}, not {head.inode}: the run was resumed?)"]
    fresh = _attach(str(run), "--history")  # the window's way on: the new file's history, then its events
    history, offset, _ = _folded(fresh.stdout)
    assert fresh.stdout.splitlines(keepends=True)[1:] == data[offset:].splitlines(keepends=True)
    assert history.status.step == STEPS + 10
    same = _attach(str(run), "--from-byte", str(offset), "--inode", str(decode_history(
        json.loads(fresh.stdout.splitlines()[0])).inode))
    assert same.returncode == 0 and same.stdout == data[offset:]


def test_an_old_long_run_gets_its_pyramid_built_by_attach(tmp_path):
    run = write_run(tmp_path / "old", STEPS, spikes={SPIKE: 50.0})  # as a version that kept none wrote it
    assert not (run / FOLDER / META_FILE).exists()
    done = _attach(str(run), "--history")
    assert done.returncode == 0, done.stderr
    assert (run / FOLDER / META_FILE).exists() and len(done.stdout) < MAX_BYTES
    history, _, _ = _folded(done.stdout)
    _same_as_open(history, run)


def test_a_short_run_is_replayed_whole_and_history_refuses_from_and_text(tmp_path):
    run = write_run(tmp_path / "short", 300)
    done = _attach(str(run), "--history")
    assert done.returncode == 0 and done.stdout == (run / rundir.EVENTS_FILE).read_bytes()
    for extra in (("--from", "3"), ("--from-byte", "0", "--text"), ("--from-byte", "12")):
        refused = _attach(str(run), "--history", *extra)
        assert refused.returncode == 2 and refused.stdout == b""
        assert refused.stderr.decode().strip().splitlines() == [
            "replica-studio attach: --history: the history comes before line 0; not with --from, --from-byte, --inode "
            "or --text"]


@pytest.mark.slow
def test_over_the_ssh_host_the_bytes_are_bounded_and_the_history_is_opens(ssh_host, tmp_path):
    from ssh_host import ALIAS, USER

    from gui_app.core.ssh_hosts import Host, add_host

    config = tmp_path / "config"
    add_host(Host(ALIAS, command=ssh_host.command), config / "hosts.json")
    run = ssh_host.home / f"history-{tmp_path.name}" / "run"
    try:
        write_run(run, STEPS, spikes={SPIKE: 50.0})  # no pyramid: the host builds it
        shutil.chown(run.parent, USER, USER)
        for path in [run, *run.rglob("*")]:
            shutil.chown(path, USER, USER)
        size = (run / rundir.EVENTS_FILE).stat().st_size
        done = _attach(str(run), "--history", "--host", ALIAS, env=ssh_host.env(config))
        assert done.returncode == 0, done.stderr[-2000:]
        assert (run / FOLDER / META_FILE).exists()  # built there, by the host's user
        assert len(done.stdout) < MAX_BYTES and len(done.stdout) < size / 50, (len(done.stdout), size)
        history, _, _ = _folded(done.stdout)
        _same_as_open(history, run)
    finally:
        shutil.rmtree(run.parent, ignore_errors=True)
