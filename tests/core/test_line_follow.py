"""The one line follower (core/line_follow.py): whole lines from a byte and a line on, the byte
each ends at, a torn line held back until its newline (or taken at once), a cut torn line, and a
file replaced under the reader."""
from __future__ import annotations

import os

from gui_app.core.line_follow import LineFollower


def test_whole_lines_only_from_the_start_byte_and_line(tmp_path):
    path = tmp_path / "engine.log"
    path.write_bytes(b"old\nkept one\nkept two\npart")
    with LineFollower(path, start_line=1, start_byte=4) as follower:
        assert follower.read() == [b"kept two\n"]  # "kept one" is line 1 after byte 4: read, not handed out
        assert follower.lines_read == 2 and follower.offset == len(b"old\nkept one\nkept two\n")
        with path.open("ab") as f:
            f.write(b"ial\nnext\n")
        assert follower.read_ends() == [(b"partial\n", 30), (b"next\n", 35)]
        assert follower.read() == [] and follower.offset == 35 == path.stat().st_size


def test_a_missing_file_reads_as_nothing_until_it_is_there(tmp_path):
    path = tmp_path / "slurm-12.out"
    follower = LineFollower(path)
    assert follower.read() == []
    path.write_bytes(b"a\n")
    assert follower.read() == [b"a\n"]
    follower.close()


def test_a_torn_line_is_taken_at_once_or_dropped_when_its_writer_cuts_it(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"one\nprogress 10%\r")
    follower = LineFollower(path)
    assert follower.read() == [b"one\n"]
    assert follower.take_pending() == b"progress 10%\r" and follower.offset == path.stat().st_size
    assert follower.take_pending() == b""
    with path.open("ab") as f:
        f.write(b"tor")
    assert follower.read() == []
    with path.open("r+b") as f:  # the next writer cuts the torn line and writes its own
        f.truncate(len(b"one\nprogress 10%\r"))
        f.seek(0, os.SEEK_END)
        f.write(b"whole\n")
    assert follower.read() == [b"whole\n"]
    follower.close()


def test_a_replaced_file_goes_on_after_the_lines_it_kept(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"a\nb\nc\n")
    follower = LineFollower(path)
    assert follower.read() == [b"a\n", b"b\n", b"c\n"]
    new = tmp_path / "new"
    new.write_bytes(b"a\nc\nd\n")  # b dropped, d new
    os.replace(new, path)
    assert follower.read_ends() == [(b"d\n", 6)]
    assert follower.lines_read == 3
    follower.close()


def test_a_reader_looks_at_the_open_file_then_skips_to_a_line_it_has_not_read(tmp_path):
    # The run list's summary (core/run_summary.py): the inode and size of the file it will read,
    # then on from the byte its cache covers; the file opened once, by that descriptor.
    path = tmp_path / "events.jsonl"
    with LineFollower(path) as follower:
        assert follower.open() is None and follower.read() == []
        path.write_bytes(b"cached\nnew\ntor")
        fd = follower.open()
        assert fd is not None and os.fstat(fd).st_ino == path.stat().st_ino and follower.open() == fd
        follower.skip_to(len(b"cached\n"))
        assert follower.read() == [b"new\n"] and follower.offset == len(b"cached\nnew\n")


def test_max_bytes_hands_out_a_file_in_parts_that_join_to_the_whole(tmp_path):
    """attach replays a file of GBs: each read holds about max_bytes of lines, not the file; lines
    skipped before start_line do not count toward it (skipping stays one read)."""
    path = tmp_path / "events.jsonl"
    lines = [b"%07d %s\n" % (i, b"x" * 90) for i in range(60_000)]  # 100 bytes a line, ~6 MB
    path.write_bytes(b"".join(lines))
    with LineFollower(path, start_line=20_000) as follower:
        parts = []
        while part := follower.read(max_bytes=1 << 20):
            parts.append(part)
        assert b"".join(b"".join(p) for p in parts) == b"".join(lines[20_000:])
        sizes = [sum(map(len, p)) for p in parts]
        assert len(parts) >= 3 and max(sizes) <= (1 << 20) + (1 << 20)  # whole chunks: one past the limit at most
        assert follower.lines_read == 60_000 and follower.offset == path.stat().st_size


def test_the_last_run_started_line_is_found_across_chunks_without_reading_the_file_whole(tmp_path):
    from gui_app.core import events_follow

    run = tmp_path / "run"
    run.mkdir()
    step = b'{"type": "step", "step": 1, "pad": "' + b"y" * 200 + b'"}\n'
    started = b'{"type": "run_started"}\n'
    body = started + step * 6_000 + started + step * 9_000  # ~3.2 MB: the second run_started in the first MB
    (run / "events.jsonl").write_bytes(body)
    assert events_follow.last_start(run) == (6_001, len(started + step * 6_000))
    (run / "events.jsonl").write_bytes(step * 10 + started)
    assert events_follow.last_start(run) == (10, len(step * 10))
    (run / "events.jsonl").write_bytes(step * 10)
    assert events_follow.last_start(run) == (0, 0)
    assert events_follow.last_start(tmp_path / "none") == (0, 0)
    # a needle across the edge of two chunks read backwards
    pad = events_follow._CHUNK - 5
    (run / "events.jsonl").write_bytes(b"\n" * 3 + b"a" * (pad - 3) + started + step * 5)
    size = (run / "events.jsonl").stat().st_size
    assert (size - (pad + 5)) < events_follow._CHUNK and events_follow.last_start(run) == (3, 3)
