"""events.jsonl as its writer keeps it (core/events_file.py) and as attach follows it
(core/events_follow.py): whole lines only, a torn tail cut, a resumed run's history rewritten
atomically, and a follower that goes on across the cut and the replacement. The file itself is
read, never through rundir.read_events (which would hide a double step)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.events_file import EventsFile
from gui_app.core.events_follow import EventsFollower


def _line(kind: str, **fields) -> bytes:
    if kind == "run_started":
        fields = {"run_dir": "run", "config": {}, **fields}
    return (json.dumps({"type": kind, "time": 1.0, **fields}, separators=(",", ":")) + "\n").encode()


def _history(steps: range, epoch_every: int = 5) -> list[bytes]:
    lines = [_line("run_started", resumed=False, start_step=0)]
    for step in steps:
        lines.append(_line("step", step=step))
        if step % epoch_every == 0:
            lines.append(_line("epoch_end", epoch=step // epoch_every, step=step))
            lines.append(_line("checkpoint", step=step, path=f"ckpt-{step}"))
    return lines


def _types_and_steps(path: Path) -> list[tuple[str, int | None]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [(value["type"], value.get("step")) for value in map(json.loads, raw.splitlines())]


def test_a_torn_tail_is_cut_when_the_next_writer_opens_the_file(tmp_path):
    path = tmp_path / rundir.EVENTS_FILE
    whole = b"".join(_history(range(1, 4)))
    path.write_bytes(whole + b'{"type":"step","st')
    events = EventsFile(path)
    events.append(_line("warning", message="next"))
    events.close()
    assert path.read_bytes() == whole + _line("warning", message="next")
    path.write_bytes(b'{"type":"ste')  # nothing but a torn line
    EventsFile(path).close()
    assert path.read_bytes() == b""


def test_a_write_that_fails_part_way_leaves_no_part_of_its_line(tmp_path):
    """A file size limit (RLIMIT_FSIZE) fails a write the way a full disk does: part of the line
    is written (a short write), then the rest fails. The line is cut back; the file stays whole."""
    path = tmp_path / rundir.EVENTS_FILE
    first = _line("step", step=1)
    script = textwrap.dedent(f"""
        import errno, resource, signal, sys
        from gui_app.core.events_file import EventsFile
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
        events = EventsFile({str(path)!r})
        events.append({first!r})
        resource.setrlimit(resource.RLIMIT_FSIZE, ({len(first) + 100}, resource.RLIM_INFINITY))
        try:
            events.append(b'{{"type":"step","step":2,"pad":"' + b"x" * 1000 + b'"}}\\n')
        except OSError as exc:
            sys.exit(0 if exc.errno == errno.EFBIG else 3)
        sys.exit(4)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 0, done.stderr
    assert path.read_bytes() == first


def test_a_resumed_run_keeps_the_history_up_to_its_checkpoint(tmp_path):
    path = tmp_path / rundir.EVENTS_FILE
    lines = _history(range(1, 13))
    lines.insert(5, b'{"type":"step","step":99,{"type":"step"}\n')  # a torn line glued to a later one
    lines.insert(9, b"[1, 2]\n")  # JSON, not an event
    path.write_bytes(b"".join(lines) + _line("run_finished", status="failed", step=12))
    before = path.stat().st_ino
    events = EventsFile(path)
    events.append(_line("progress", stage="decode"))  # the new process's events before its run_started
    events.keep_history_until(10)
    events.append(_line("run_started", resumed=True, start_step=10))
    events.append(_line("step", step=11))
    events.close()
    assert path.stat().st_ino != before  # a new file, renamed over the old one
    got = _types_and_steps(path)
    assert [s for kind, s in got if kind == "step"] == list(range(1, 12))  # each step once, in order
    assert [s for kind, s in got if kind == "epoch_end"] == [5, 10]
    assert [kind for kind, _ in got][-4:] == ["run_finished", "progress", "run_started", "step"]
    assert ("checkpoint", 10) in got and not list(tmp_path.glob(".*partial*"))


def test_a_follower_hands_out_whole_lines_from_line_n_and_goes_on_across_a_cut_tail(tmp_path):
    path = tmp_path / rundir.EVENTS_FILE
    follower = EventsFollower(tmp_path, start_line=2)
    assert follower.read() == []  # no file yet
    lines = _history(range(1, 3))  # run_started, step 1, step 2
    path.write_bytes(b"".join(lines) + b'{"type":"st')
    assert follower.read() == lines[2:]
    assert (follower.lines_read, follower.finished) == (3, False)
    events = EventsFile(path)  # the next writer: the torn tail goes
    finished = _line("run_finished", status="completed", step=2)
    events.append(finished)
    events.close()
    assert follower.read() == [finished] and follower.finished


def test_a_follower_goes_on_in_the_replaced_file_after_the_lines_it_had(tmp_path):
    """A follower that had read steps 1..12 when a run resumed at 10 rewrote the file: it goes
    on with what the new file holds after the kept lines it already had (no line twice)."""
    path = tmp_path / rundir.EVENTS_FILE
    lines = _history(range(1, 13))
    path.write_bytes(b"".join(lines))
    follower = EventsFollower(tmp_path)
    assert follower.read() == lines
    events = EventsFile(path)
    progress = _line("progress", stage="decode")
    events.append(progress)
    assert follower.read() == [progress]
    events.keep_history_until(10)
    resumed = [_line("run_started", resumed=True, start_step=10), _line("step", step=11)]
    for line in resumed:
        events.append(line)
    assert follower.read() == resumed
    events.close()
    assert follower.lines_read == len(path.read_bytes().splitlines())


def test_the_run_lists_summary_is_rebuilt_when_the_file_is_replaced(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / rundir.CONFIG_FILE).write_text("{}")
    path = run / rundir.EVENTS_FILE
    path.write_bytes(b"".join(_history(range(1, 13))))
    assert rundir.summarize_events(run).step == 12
    events = EventsFile(path)
    events.keep_history_until(5)
    for line in [_line("run_started", resumed=True, start_step=5, total_steps=30)] + [
            _line("step", step=s, pad="x" * 200) for s in range(6, 20)]:
        events.append(line)  # longer than the cached offset: only the inode tells
    events.close()
    status = rundir.summarize_events(run)
    assert (status.step, status.total_steps, status.status) == (19, 30, "interrupted")
