"""The bad-input matrix beyond ``train`` (test_bad_input.py): every other command given a hostile
or surprising argument ends with exit 2 and one line on stderr, never a traceback or a silent
exit 0; and no command warns where a script runs without XDG_RUNTIME_DIR. (What attach does with
an empty stdin: test_attach_input.py.)

Each case runs the real command line as a subprocess, as a user's shell does (tests/engine/
cli_shell.py); none of them starts TensorFlow. A fake ``ssh`` first on PATH records any call: a
refused host never reaches it.
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_shell import Shell
from compared_runs import write_run
from engine_helpers import config_dict

from gui_app.core import events as ev

HOSTILE_HOSTS = ["a b", "-oProxyCommand=touch pwned", ""]


@pytest.fixture
def shell(tmp_path) -> Shell:
    return Shell(tmp_path)


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
    (run.parent / "config.json").write_text("{}")  # `train config.json --runs-dir .`: a config beside the runs
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
    # A damaged record: the run directory each trial's detached start printed (trials/N.run), or
    # (a folder of an earlier version) its first event (trials/N.jsonl), still names its run.
    (sweep / "trials.json").write_text("[1, 2]")
    (sweep / "trials").mkdir()
    for n, run in runs.items():
        if n < 2:
            (sweep / "trials" / f"{n}.run").write_text(f"{run}\n")
            continue
        started = ev.RunStarted(time=1.0, run_dir=str(run), config={})
        (sweep / "trials" / f"{n}.jsonl").write_text(json.dumps(ev.encode(started)) + "\n")
    again = shell("compare", str(sweep), "--json")
    assert [row["names"] for row in json.loads(again.stdout)["rows"]] == [["trial 0"], ["trial 1"], ["trial 2"]]


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


@pytest.mark.parametrize("argv", [["runs", "--runs-dir"], ["compare", "{run}", "--csv"],
                                  ["inspect", "{config}", "--samples"], ["sweep", "{sweep}", "--sweeps-dir"],
                                  ["runs", "--host", "here", "--runs-dir"],
                                  ["train", "{config}", "--events", "jsonl", "--runs-dir"]],
                         ids=["runs", "compare", "inspect", "sweep", "runs-on-host", "train"])
def test_an_empty_path_is_refused_not_taken_for_the_default(shell, tmp_path, argv):
    """``--runs-dir "$DIR"`` with DIR unset: the default runs folder (or no CSV) was used, quietly."""
    names = _files(tmp_path)
    proc = shell(*(arg.format(**names) for arg in argv), "")
    flag = argv[-1]
    assert _one_line(proc, argv[0]) == f"{flag}: empty; give one or leave the option out"
    if argv[0] == "train":  # a refused run's events
        assert [json.loads(line)["type"] for line in proc.stdout.splitlines()] == ["error", "run_finished"]
    assert not shell.ssh_log.exists()


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


if sys.platform != "linux":  # pragma: no cover - the fake ssh is a script run by sh, errno texts as Linux says them
    pytestmark = pytest.mark.skip("a POSIX shell and Linux's error texts")
