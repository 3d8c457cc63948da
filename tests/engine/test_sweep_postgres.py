"""A sweep whose study lives on a real PostgreSQL server (Debian's, started here as its own
user), as a sweep spread over several machines would keep it."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from engine_helpers import run_cli

pytestmark = pytest.mark.slow

BASE = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}, "strategy": {"name": "default"},
        "training": {"epochs": 1, "seed": 1}}


def _server_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return found[-1].parent if found else None


@pytest.fixture
def postgres_url():
    pytest.importorskip("psycopg", reason="Optuna's PostgreSQL storage needs psycopg (pip install \"psycopg[binary]\")")
    bin_dir = _server_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server installed (Debian: apt install postgresql)")
    # initdb refuses to run as root: the server then runs as nobody, in a folder of its own.
    as_user = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
    home = Path(tempfile.mkdtemp(prefix="replica-studio-pg-"))
    if as_user:
        os.chown(home, 65534, 65534)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def run(*args: str) -> None:
        done = subprocess.run([*as_user, str(bin_dir / args[0]), *args[1:]], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr

    run("initdb", "-D", str(home / "db"), "-U", "sweeps", "--auth=trust")
    run("pg_ctl", "-D", str(home / "db"), "-l", str(home / "log"), "-w", "-o",
        f"-p {port} -k {home} -c listen_addresses=127.0.0.1", "start")
    try:
        run("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "sweeps", "sweeps")
        yield f"postgresql://sweeps@127.0.0.1:{port}/sweeps"
    finally:
        run("pg_ctl", "-D", str(home / "db"), "-m", "fast", "-w", "stop")
        shutil.rmtree(home, ignore_errors=True)


def test_a_sweep_keeps_its_study_on_postgresql(tmp_path, postgres_url):
    sweep_file = tmp_path / "pg.json"
    sweep_file.write_text(json.dumps({"base": BASE, "parameters": {
        "training.learning_rate": {"choice": [0.001, 0.003]}}, "method": "grid", "trials": 2, "parallel": 2}))
    done = run_cli("sweep", str(sweep_file), "--sweeps-dir", str(tmp_path / "sweeps"), "--storage", postgres_url)
    assert done.returncode == 0, done.stderr
    sweep_dir = Path(done.stdout.splitlines()[0])
    assert not (sweep_dir / "study.db").exists()
    assert json.loads((sweep_dir / "study.json").read_text())["storage"] == postgres_url
    status = json.loads(run_cli("sweep", "status", str(sweep_dir), "--json").stdout)
    assert [t["state"] for t in status["trials"]] == ["completed", "completed"]

    import optuna  # the server holds the study itself

    study = optuna.load_study(study_name=sweep_dir.name, storage=postgres_url)
    assert sorted(t.params["training.learning_rate"] for t in study.trials) == [0.001, 0.003]
    assert {t.user_attrs["run_dir"] for t in study.trials} == {t["run_dir"] for t in status["trials"]}

    refused = run_cli("sweep", str(sweep_file), "--sweeps-dir", str(tmp_path / "sweeps"),
                      "--storage", postgres_url.replace("/sweeps", "/missing"))
    assert refused.returncode == 2 and refused.stderr.startswith("replica-studio sweep: --storage: cannot open ")
    assert refused.stderr.count("\n") == 1, refused.stderr
