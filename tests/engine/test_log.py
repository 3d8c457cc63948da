"""``replica-studio log``: a run's engine.log, followed while its process holds the run (its lock),
ended by a piped stdin's end, and with ``--json`` resumable from the byte a line ends at."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from gui_app.core.run_lock import RunLock
from gui_app.identity import app_command, app_env

TIMEOUT_S = 60


def _run_dir(tmp_path: Path, log: bytes) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text("{}")
    (run_dir / "engine.log").write_bytes(log)
    return run_dir


def _log(*args: str, input: bytes | None = b"") -> subprocess.CompletedProcess:
    return subprocess.run(app_command("log", *args), input=input, capture_output=True, env=app_env(),
                          timeout=TIMEOUT_S)


def test_log_prints_the_file_and_with_json_the_byte_each_line_ends_at(tmp_path):
    run_dir = _run_dir(tmp_path, "one\nzwei – two\nthree, unfinished".encode())
    assert _log(str(run_dir)).stdout == "one\nzwei – two\nthree, unfinished".encode()
    lines = [json.loads(line) for line in _log(str(run_dir), "--json").stdout.splitlines()]
    assert lines == [{"type": "log", "line": "one", "next": 4},
                     {"type": "log", "line": "zwei – two", "next": 17},  # bytes, not characters
                     {"type": "log", "line": "three, unfinished", "next": 34}]
    assert [json.loads(line)["line"] for line in _log(str(run_dir), "--json", "--from", "4").stdout.splitlines()] \
        == ["zwei – two", "three, unfinished"]
    end = _log(str(run_dir), "--json", "--from", "end").stdout.splitlines()  # where the end was, then what follows
    assert [json.loads(line) for line in end] == [{"type": "log", "next": 34}]
    assert _log(str(run_dir), "--from", "-1").returncode == 2
    bad = _log(str(tmp_path / "nothing"))
    assert bad.returncode == 2 and bad.stderr.decode().strip() == (
        f"replica-studio log: run_dir: {tmp_path / 'nothing'} is not a run directory (no config.json)")


def test_follow_goes_on_while_the_run_is_held_and_ends_with_it_or_with_its_input(tmp_path):
    run_dir = _run_dir(tmp_path, b"before\n")
    lock = RunLock(run_dir).acquire()  # this process runs it, as far as log can tell
    follower = subprocess.Popen(app_command("log", str(run_dir), "--follow", "--json"), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=app_env())
    try:
        assert json.loads(follower.stdout.readline())["line"] == "before"
        with (run_dir / "engine.log").open("ab") as log:
            log.write(b"during, in two wr")
            log.flush()
            log.write(b"ites\nlast")  # whole lines only while it runs
        assert json.loads(follower.stdout.readline()) == {"type": "log", "line": "during, in two writes",
                                                          "next": 29}
        lock.release()  # the run's process is gone: what is left, the unfinished line too, then the end
        assert json.loads(follower.stdout.readline()) == {"type": "log", "line": "last", "next": 33}
        assert follower.wait(TIMEOUT_S) == 0
        lock = RunLock(run_dir).acquire()
        again = subprocess.Popen(app_command("log", str(run_dir), "--follow", "--from", "33"), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, env=app_env())
        again.stdin.close()  # the window let go (or the connection dropped): it ends, the run goes on
        assert again.wait(TIMEOUT_S) == 0 and again.stdout.read() == b""
    finally:
        follower.kill()
        lock.release()
