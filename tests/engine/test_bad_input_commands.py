"""The bad-input matrix beyond ``train`` (test_bad_input.py): every other command given a hostile
or surprising argument ends with exit 2 and one line on stderr, never a traceback or a silent
exit 0; and what a script meets (an empty stdin, no XDG_RUNTIME_DIR) behaves as documented.

Each case runs the real command line as a subprocess, as a user's shell does; none of them starts
TensorFlow. A fake ``ssh`` first on PATH records any call: a refused host never reaches it.
"""
from __future__ import annotations

import csv
import json
import os
import queue
import subprocess
import sys
import time
from pathlib import Path

import pytest
from compared_runs import write_run
from engine_helpers import LineReader, config_dict

from gui_app.core import events as ev
from gui_app.core.run_lock import RunLock
from gui_app.engine.events import format_text
from gui_app.identity import app_command, app_env

HOSTILE_HOSTS = ["a b", "-oProxyCommand=touch pwned", ""]


# A fake ssh: it records each call; the host "here" runs the command in this machine's shell as
# sshd would (its stdin a pipe that ends with ssh's own); any other host is unreachable (255).
_FAKE_SSH = """#!{python}
import os, subprocess, sys, threading
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(" ".join(args) + "\\n")
host, command = (args[args.index("--") + 1:] + ["", ""])[:2]
if "-O" in args or host != "here":
    sys.exit(255)
proc = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE)
def copy():
    try:
        while data := os.read(0, 4096):
            proc.stdin.write(data)
            proc.stdin.flush()
        proc.stdin.close()
    except OSError:
        pass
threading.Thread(target=copy, daemon=True).start()
os._exit(proc.wait())  # the copy may be blocked in a read: no interpreter teardown to wait for it
"""


@pytest.fixture
def shell(tmp_path):
    """Run ``replica-studio ARGS`` as a user would, with its own hosts file and a fake ssh
    (:data:`_FAKE_SSH`) first on PATH, beside a ``replica-studio`` that is this checkout."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh_log = tmp_path / "ssh.log"
    (bin_dir / "ssh").write_text(_FAKE_SSH.format(python=sys.executable, log=str(ssh_log)))
    (bin_dir / "replica-studio").write_text(f'#!/bin/sh\nexec {sys.executable} -m gui_app "$@"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = app_env({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                   "REPLICA_STUDIO_CONFIG_DIR": str(tmp_path / "config")})

    def run(*args: str, given: str | None = None, drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        """``given``: its stdin is a pipe holding that text (else /dev/null); ``drop``: variables unset."""
        return subprocess.run(app_command(*args), input=given, stdin=None if given is not None else subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=120,
                              env={k: v for k, v in env.items() if k not in drop})

    run.ssh_log = ssh_log  # type: ignore[attr-defined]
    run.env = env  # type: ignore[attr-defined]
    return run


def _one_line(proc: subprocess.CompletedProcess, command: str, code: int = 2) -> str:
    """The one stderr line of a refused command, without its ``replica-studio COMMAND: `` prefix."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == code, proc.stderr[-2000:]
    assert len(lines) == 1, lines
    prefix = f"replica-studio {command}: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


# ---- --host ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", HOSTILE_HOSTS, ids=["space", "ssh-option", "empty"])
def test_a_hostile_host_is_refused_as_hosts_add_refuses_it(shell, tmp_path, name):
    added = shell("hosts", "add", name)
    refusal = _one_line(added, "hosts add")
    assert refusal.startswith("host: ") and repr(name) in refusal
    assert _one_line(shell("runs", f"--host={name}"), "runs") == refusal  # the same words, one source
    run = write_run(tmp_path / "run", 0.01, 1, 0.8, 0.8)
    assert _one_line(shell("attach", str(run), f"--host={name}"), "attach") == refusal
    assert not shell.ssh_log.exists(), "a refused host reached ssh"


def test_a_run_on_a_hostile_host_ends_as_a_refused_run(shell, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(config_dict()))
    proc = shell("train", str(config), "--host", "a b", "--events", "jsonl")
    message = _one_line(proc, "train")
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [e["type"] for e in events] == ["error", "run_finished"]
    assert events[0]["message"] == message and events[0]["kind"] == "input"
    assert events[1]["status"] == "failed" and not shell.ssh_log.exists()


# ---- runs, stop ---------------------------------------------------------------------------
def test_runs_refuses_a_file_or_a_run_directory_for_its_folder(shell, tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    assert _one_line(shell("runs", "--runs-dir", str(a_file)), "runs") == \
        f"--runs-dir: {a_file} is a file, not a folder of runs"
    run = write_run(tmp_path / "runs" / "r1", 0.01, 1, 0.8, 0.8)
    assert _one_line(shell("runs", "--json", "--runs-dir", str(run)), "runs") == \
        f"--runs-dir: {run} is a run directory, not a folder of runs (its runs folder: {run.parent})"
    listed = shell("runs", "--json", "--runs-dir", str(run.parent))  # its runs folder lists it
    assert listed.returncode == 0 and [r["run_dir"] for r in json.loads(listed.stdout)] == [str(run)]


def test_runs_of_a_folder_not_made_yet_are_none(shell, tmp_path):
    """A new user's (or a host's before its first run): no runs, exit 0; the window reads [] from it."""
    missing = tmp_path / "not-yet"
    text = shell("runs", "--runs-dir", str(missing))
    assert (text.returncode, text.stdout, text.stderr) == (0, f"no runs in {missing} (no such folder yet)\n", "")
    listed = shell("runs", "--json", "--runs-dir", str(missing))
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])


@pytest.mark.parametrize("timeout", ["-1", "nan"])
def test_stop_refuses_a_timeout_it_could_never_keep(shell, tmp_path, timeout):
    run = write_run(tmp_path / "run", 0.01, 1, 0.8, 0.8)
    assert _one_line(shell("stop", str(run), "--timeout", timeout), "stop") == \
        f"--timeout: must be a number of seconds >= 0; got {timeout}"


# ---- compare ------------------------------------------------------------------------------
def test_compare_csv_into_a_folder_or_under_a_file_names_the_csv(shell, tmp_path):
    runs = [str(write_run(tmp_path / name, lr, 1, 0.8, 0.8)) for name, lr in (("a", 0.01), ("b", 0.001))]
    assert _one_line(shell("compare", *runs, "--csv", str(tmp_path)), "compare") == \
        f"--csv: {tmp_path} is a folder; name the CSV file to write"
    (tmp_path / "file").write_text("x")
    under = tmp_path / "file" / "table.csv"
    assert _one_line(shell("compare", *runs, "--csv", str(under)), "compare") == \
        f"--csv: cannot write {under}: Not a directory"
    assert not list(tmp_path.glob(".*partial*")), "a temporary file was left"


def test_compare_a_sweep_folder_names_each_row_by_its_trial(shell, tmp_path):
    """trials.json says which run is which trial; runs are read in trial order, whatever their names."""
    sweep = tmp_path / "sweep"
    (sweep / "runs").mkdir(parents=True)
    (sweep / "sweep.json").write_text("{}")
    lrs = {0: 0.01, 1: 0.001, 2: 0.003}
    runs = {n: write_run(sweep / "runs" / f"2026120{9 - n}-run", lr, 1, 0.8, 0.7 + n / 10) for n, lr in lrs.items()}
    (sweep / "trials.json").write_text(json.dumps({str(n): {"run_dir": str(r), "pid": 1} for n, r in runs.items()}))
    as_json = shell("compare", str(sweep), "--json", "--csv", str(tmp_path / "t.csv"))
    assert as_json.returncode == 0, as_json.stderr
    rows = json.loads(as_json.stdout)["rows"]
    assert [row["names"] for row in rows] == [["trial 0"], ["trial 1"], ["trial 2"]]
    assert [row["values"]["training.learning_rate"] for row in rows] == [0.01, 0.001, 0.003]
    with (tmp_path / "t.csv").open() as f:
        assert [row["names"] for row in csv.DictReader(f)] == ["trial 0", "trial 1", "trial 2"]
    table = shell("compare", str(sweep)).stdout.splitlines()
    assert table[0].split()[-1] == "run" and [line.split()[-2:] for line in table[1:]] == \
        [["trial", "0"], ["trial", "1"], ["trial", "2"]]


# ---- config keys ----------------------------------------------------------------------------
def test_a_misspelled_key_suggests_the_right_one(shell, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"training": {"learning_rat": 0.1}}))
    assert _one_line(shell("train", str(config), "--runs-dir", str(tmp_path / "runs")), "train").startswith(
        "training.learning_rat: unknown key; did you mean 'learning_rate'? (known keys: ")
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"base": {}, "parameters": {"learning_rate": {"uniform": [0.01, 0.1]}}}))
    assert _one_line(shell("sweep", str(sweep), "--sweeps-dir", str(tmp_path)), "sweep") == (
        "parameters.learning_rate: not a run configuration key; did you mean 'training.learning_rate'? "
        "(section.key, as in docs/config.md)")
    sweep.write_text(json.dumps({"base": {}, "trails": 3, "parameters": {}}))
    assert _one_line(shell("sweep", str(sweep), "--sweeps-dir", str(tmp_path)), "sweep").startswith(
        "trails: unknown key; did you mean 'trials'? (known keys: ")
    assert not list(tmp_path.glob("*/sweep.json")), "a refused sweep left a folder"


# ---- a file where a folder is expected, a folder where a file is, a damaged record -------------
def _files(tmp: Path) -> dict[str, str]:
    """Things to point a command at: a file, a folder, a run, a sweep folder whose record is damaged."""
    (tmp / "notes.txt").write_text("x")
    (tmp / "config.json").write_text(json.dumps(config_dict()))
    (tmp / "cluster.json").write_text(json.dumps({"strategy": {"name": "multi_worker_mirrored",
                                                               "cluster": ["10.0.0.1:2222", "10.0.0.2:2222"]}}))
    (tmp / "sweep.json").write_text(json.dumps({"base": {}, "parameters": {"training.seed": {"int": [1, 2]}}}))
    sweep = tmp / "sweep-folder"
    (sweep / "runs").mkdir(parents=True)
    (sweep / "sweep.json").write_text((tmp / "sweep.json").read_text())
    (sweep / "study.json").write_text("{")
    write_run(tmp / "run", 0.01, 1, 0.8, 0.8)
    return {"file": str(tmp / "notes.txt"), "folder": str(tmp), "config": str(tmp / "config.json"),
            "cluster": str(tmp / "cluster.json"), "sweep": str(tmp / "sweep.json"), "sweep_dir": str(sweep),
            "run": str(tmp / "run")}


SURPRISES = [  # (command as the line names it, argv with {names} of _files, the line after its prefix)
    ("train", "train {config} --runs-dir {file}", "--runs-dir: {file} is a file, not a folder"),
    ("sweep", "sweep {sweep} --sweeps-dir {file}", "--sweeps-dir: {file} is a file, not a folder"),
    ("sweep", "sweep {sweep_dir}", "{sweep_dir} is a sweep folder, not a sweep file: replica-studio sweep "
                                   "status|resume|stop {sweep_dir}"),
    ("sweep", "sweep status", "status: needs the sweep folder: replica-studio sweep status SWEEP_DIR"),
    ("sweep", "sweep stats runs/s1", "expected SWEEP.json or one of status, resume, stop and a sweep folder; "
                                     "got 'stats runs/s1'; did you mean 'status'?"),
    ("sweep status", "sweep status {sweep_dir}", "sweep_dir: {sweep_dir}/study.json is damaged (not valid JSON)"),
    ("sweep resume", "sweep resume {sweep_dir}", "sweep_dir: {sweep_dir}/study.json is damaged (not valid JSON)"),
    ("inspect", "inspect {config} --samples {folder}", "--samples: {folder} is a folder; name the .npz file to write"),
    ("cluster-script", "cluster-script {cluster} --slurm -o {folder}",
     "--output: {folder} is a folder; name the file to write"),
    ("cluster-script", "cluster-script {cluster} --slurm -o {file}/job.sh",
     "--output: cannot write {file}/job.sh: Not a directory"),
    ("submit", "submit {cluster} --slurm --runs-dir {file}", "{file} is a file, not a folder"),
    ("predict", "predict {run} {folder}", "{folder}: a folder, not an image file (give the images in it)"),
]


@pytest.mark.parametrize("command, argv, expected", SURPRISES, ids=[argv.split(" {")[0] + f"-{i}"
                                                                    for i, (_, argv, _) in enumerate(SURPRISES)])
def test_a_surprising_path_is_one_line_and_exit_2(shell, tmp_path, command, argv, expected):
    names = _files(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert _one_line(shell(*argv.format(**names).split()), command) == expected.format(**names)
    assert sorted(tmp_path.rglob("*")) == before, "a refused command left something behind"
    assert not (tmp_path.parent / f"{tmp_path.name}.npz").exists()  # numpy's FOLDER.npz, beside it


# ---- attach -------------------------------------------------------------------------------
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
    proc = subprocess.Popen(app_command("attach", str(run), "--text"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=shell.env,
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
    from gui_app.engine.attach_command import stdin_ends_attachment

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
    proc = subprocess.Popen(app_command("attach", str(run), "--text", "--host", "here"),
                            stdin=subprocess.DEVNULL if stdin == "devnull" else subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=shell.env)
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


# ---- no XDG_RUNTIME_DIR -----------------------------------------------------------------------
def test_no_command_warns_without_xdg_runtime_dir(shell, tmp_path):
    """Root shells, ssh sessions without systemd, cron and containers have no XDG_RUNTIME_DIR: no
    command prints platformdirs' RuntimeDirWarning, those that reach ssh (the last two) included."""
    without = ("XDG_RUNTIME_DIR",)
    run = write_run(tmp_path / "runs" / "r1", 0.01, 1, 0.8, 0.8)
    commands = [("runs", "--runs-dir", str(run.parent)), ("hosts", "list"), ("hosts", "add", "h1"),
                ("runs", "--host", "a b"), ("attach", str(run), "--text"), ("compare", str(run)),
                ("runs", "--host", "h1"), ("hosts", "remove", "h1")]
    for args in commands:
        proc = shell(*args, drop=without)
        assert "Warning" not in proc.stderr, (args, proc.stderr)
    assert shell.ssh_log.exists()  # the last two went through ssh's options (the connection folder)


if sys.platform != "linux":  # pragma: no cover - fstat, process groups and flock as Linux has them
    pytestmark = pytest.mark.skip("POSIX stdin and locks")
