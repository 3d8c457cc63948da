"""cluster-script: the sbatch script (run under a fake srun) and the Kubeflow manifest (parsed)."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from engine_helpers import run_cli

from gui_app.core import rundir
from gui_app.core.cluster_addresses import free_ports
from gui_app.core.config import RunConfig
from gui_app.identity import app_command, app_env


def _config(tmp_path, **strategy):
    data = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
            "strategy": {"name": "multi_worker_mirrored", "workers": 2, **strategy},
            "training": {"epochs": 1, "global_batch_size": 64, "seed": 2}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return path


def parse_manifest(text: str) -> list[dict]:
    """Our manifests are JSON documents between ``---`` lines, with ``#`` comment lines: YAML."""
    docs, current = [], []
    for line in text.splitlines() + ["---"]:
        if line.startswith("#"):
            continue
        if line.strip() == "---":
            if "".join(current).strip():
                docs.append(json.loads("\n".join(current)))
            current = []
        else:
            current.append(line)
    return docs


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="runs the sbatch script with bash")
def test_slurm_script_runs_its_worker_under_a_fake_srun(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative --runs-dir
    config = _config(tmp_path)
    script = tmp_path / "run.sbatch"
    done = run_cli("cluster-script", str(config), "--slurm", "-o", str(script), "--runs-dir", "runs",
                   "--partition", "gpu", "--time", "1:00:00", "--account", "lab", "--cpus-per-task", "4",
                   "--gpus-per-node", "2", "--sbatch=--qos=long")
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    sbatch = _sbatch_lines(text)
    assert sbatch["nodes"] == "2" and sbatch["ntasks-per-node"] == "1"
    assert (sbatch["partition"], sbatch["time"], sbatch["account"]) == ("gpu", "1:00:00", "lab")
    assert (sbatch["cpus-per-task"], sbatch["gpus-per-node"], sbatch["qos"]) == ("4", "2", "long")
    assert sbatch["signal"] == "B:USR1@120" and sbatch["requeue"] is True
    # The runs folder is made absolute, and the comment names the real output file.
    output = sbatch["output"]
    assert output.startswith(str(tmp_path / "runs") + "/") and f"# Output: {output}" in text
    assert "# Submit with: sbatch run.sbatch" in text
    # A fake srun: a one-task allocation on this machine, then the command itself.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text("#!/bin/bash\nexport SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_NUM_TASKS=1 "
                    "SLURM_STEP_NODELIST=localhost SLURM_STEP_TASKS_PER_NODE=1\n"
                    "while [[ $1 == --* ]]; do shift; done\nexec \"$@\"\n")
    srun.chmod(0o755)
    env = app_env({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TF_CPP_MIN_LOG_LEVEL": "2",
                   "REPLICA_STUDIO": " ".join(shlex.quote(a) for a in app_command()),
                   "REPLICA_STUDIO_SLURM_PORT_BASE": str(free_ports(1)[0])})
    ran = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=240)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "run completed" in ran.stdout
    (run,) = rundir.list_runs(tmp_path / "runs")
    assert run.status == "completed" and run.has_model
    assert f"RUN_DIR={run.path}" in text  # the script names its run: submitted again, it continues it


def _sbatch_lines(text: str) -> dict[str, str | bool]:
    """``#SBATCH --key=value`` lines as a dict (flags: True)."""
    lines = [line[len("#SBATCH --"):] for line in text.splitlines() if line.startswith("#SBATCH")]
    return {key: value if sep else True for key, sep, value in (line.partition("=") for line in lines)}


def test_kubeflow_manifest_has_a_config_map_and_a_tfjob(tmp_path):
    config = _config(tmp_path, workers=3)
    done = run_cli("cluster-script", str(config), "--kubeflow", "--image", "example/replica:1")
    assert done.returncode == 0, done.stderr
    config_map, job = parse_manifest(done.stdout)
    assert config_map["kind"] == "ConfigMap" and job["kind"] == "TFJob"
    run = RunConfig.from_json(config_map["data"]["run.json"])
    assert run.strategy.cluster == "tf_config" and run.strategy.name == "multi_worker_mirrored"
    specs = job["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Chief": 1, "Worker": 2}
    container = specs["Worker"]["template"]["spec"]["containers"][0]
    assert container["image"] == "example/replica:1"
    assert container["command"][:3] == ["replica-studio", "worker", "/config/run.json"]


def test_kubeflow_manifest_for_parameter_servers(tmp_path):
    config = _config(tmp_path, name="parameter_server", workers=2, ps=1)
    done = run_cli("cluster-script", str(config), "--kubeflow")
    assert done.returncode == 0, done.stderr
    _, job = parse_manifest(done.stdout)
    specs = job["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Chief": 1, "Worker": 2, "PS": 1}
    assert specs["Chief"]["template"]["spec"]["containers"][0]["command"][1] == "train"


def test_slurm_refuses_a_config_that_is_not_multi_worker(tmp_path):
    path = tmp_path / "plain.json"
    path.write_text(json.dumps({"strategy": {"name": "mirrored"}}))
    done = run_cli("cluster-script", str(path), "--slurm")
    assert done.returncode == 2 and "strategy.name" in done.stderr


def test_public_hosts_are_refused_unless_allowed(tmp_path):
    from gui_app.engine.cluster.topology import load_config

    config = _config(tmp_path, workers=0, cluster=["192.168.0.2:2222", "8.8.8.8:2222"])
    done = run_cli("train", str(config), "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert "strategy.cluster: 8.8.8.8 is not a loopback or private address" in done.stderr
    assert load_config(str(config), allow_public_hosts=True).strategy.allow_public_hosts
    assert load_config(str(config), cluster="slurm").strategy.cluster == "slurm"


def _fake_sbatch(tmp_path, body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(f"#!/bin/bash\n{body}\n")
    sbatch.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.skipif(sys.platform != "linux", reason="a fake sbatch in bash")
def test_submit_writes_the_script_into_the_run_directory_and_prints_the_job_id(tmp_path):
    env = _fake_sbatch(tmp_path, 'echo "$PWD $*" > "$PWD/sbatch-args"; echo "4242;rstest"')
    done = run_cli("submit", str(_config(tmp_path)), "--slurm", "--runs-dir", str(tmp_path / "runs"),
                   "--partition", "debug", env=env)
    assert done.returncode == 0, done.stderr
    job_id, run_dir = done.stdout.splitlines()
    assert job_id == "4242" and rundir.is_run_dir(run_dir)
    script = Path(run_dir) / "job.sbatch"
    assert (Path(run_dir) / "sbatch-args").read_text().split() == [run_dir, "--parsable", str(script)]
    text = script.read_text()
    assert f"#SBATCH --output={run_dir}/slurm-%j.out" in text and "#SBATCH --partition=debug" in text
    assert f"worker {run_dir}/config.json --cluster slurm" in text


@pytest.mark.parametrize("sbatch, said", [
    ('echo "sbatch: error: invalid partition specified: gpu" >&2; exit 1', "sbatch: error: invalid partition"),
    (None, "sbatch: not found on PATH"),
])
def test_a_refused_submission_is_one_line_and_leaves_no_run_directory(tmp_path, sbatch, said):
    env = _fake_sbatch(tmp_path, sbatch) if sbatch else {"PATH": str(tmp_path / "empty")}
    done = run_cli("submit", str(_config(tmp_path)), "--slurm", "--runs-dir", str(tmp_path / "runs"), env=env)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"replica-studio submit: {said}")
    assert not any((tmp_path / "runs").iterdir())


def test_submit_refuses_a_config_that_is_not_multi_worker(tmp_path):
    path = tmp_path / "plain.json"
    path.write_text(json.dumps({"strategy": {"name": "mirrored"}}))
    done = run_cli("submit", str(path), "--slurm", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2 and "strategy.name" in done.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_worker_resume_or_start_is_one_word_and_its_old_name_still_works_unlisted():
    """``--resume-or-start`` was ``--continue``, the control word that un-pauses a run; scripts
    written before (a job.sbatch submitted again, a kept job.yaml) still say ``--continue``."""
    from gui_app.engine.commands.cli import build_parser

    parser = build_parser()
    for flag in ("--resume-or-start", "--continue"):
        assert parser.parse_args(["worker", "run.json", "--run-dir", "r", flag]).resume_or_start is True
    assert parser.parse_args(["worker", "run.json"]).resume_or_start is False
    worker = parser._subparsers._group_actions[0].choices["worker"]
    assert "--resume-or-start" in worker.format_help() and "--continue" not in worker.format_help()
