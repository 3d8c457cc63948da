"""A MultiWorkerMirrored cluster ends at once when its run is over (engine/cluster/leaving.py):
every worker meets the others at the end and leaves, the chief last, with nothing in the log.

Before that, ``run_finished`` of two local workers with two CPU replicas each came 18-123 s after
the last ``eval``, and the log held TensorFlow's refused heartbeats and "The tasks have crashed"."""
from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest
from cluster_helpers import alive
from engine_helpers import run_cli, until

from gui_app.core import rundir
from gui_app.core.live_runs import read_process
from gui_app.engine.cluster.leaving import peers_gone
from gui_app.ui.tabs.log_lines import ERROR, kind

# From the end of the final evaluation to run_finished: the barrier, the workers' exit and the
# launcher's. A few tenths of a second here; the bound leaves room for a loaded 2-core machine.
END_BOUND_S = 5.0
# What TensorFlow's coordination service and gRPC said when the workers did not end together.
TF_SHUTDOWN_NOISE = ("CoordinationService", "heartbeat", "The tasks have crashed", "GRPC", "UNAVAILABLE")


def _config(tmp_path: Path) -> Path:
    data = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
            "strategy": {"name": "multi_worker_mirrored", "workers": 2},
            "training": {"epochs": 10, "global_batch_size": 64, "seed": 5, "steps_per_call": 5},
            "runtime": {"cpu_devices": 2}}
    path = tmp_path / "mw.json"
    path.write_text(json.dumps(data))
    return path



def _events(run_dir: Path) -> list[dict]:
    path = run_dir / rundir.EVENTS_FILE
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the local cluster uses PDEATHSIG")
def test_a_finished_cluster_ends_within_seconds_of_its_last_eval_with_a_clean_log(tmp_path):
    done = run_cli("train", str(_config(tmp_path)), "--runs-dir", str(tmp_path / "runs"), "--detach", timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = Path(done.stdout.strip())
    launcher = read_process(run_dir)
    assert launcher is not None
    until(lambda: any(e["type"] == "run_finished" for e in _events(run_dir)), 300, "run_finished")
    until(lambda: not alive(launcher.pid), 30, "end of the launcher")

    events = _events(run_dir)
    finished = events[-1]
    assert finished["type"] == "run_finished" and finished["status"] == "completed", finished
    last_eval = [e for e in events if e["type"] == "eval"][-1]
    assert finished["time"] - last_eval["time"] <= END_BOUND_S, finished["time"] - last_eval["time"]

    # The join is news on the log, not a warning event (the Log tab showed it as one).
    assert not [e for e in events if e["type"] == "warning" and "joined" in e["message"]]
    log = (run_dir / rundir.LOG_FILE).read_text().splitlines()
    assert any(line.startswith("[worker 1] weights sha256") for line in log), log  # the workers' lines are here
    assert any("cluster of 2 workers joined in" in line for line in log), log
    errors = [line for line in log if kind(line) == ERROR]
    noise = [line for line in log if any(word in line for word in TF_SHUTDOWN_NOISE)]
    assert errors == [] and noise == [], log


def test_the_chief_waits_until_the_other_workers_servers_are_gone():
    server = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{server.getsockname()[1]}"
    started = time.monotonic()
    assert not peers_gone([address], 0.3)  # still listening: the chief would wait the whole bound
    assert time.monotonic() - started >= 0.3
    server.close()
    started = time.monotonic()
    assert peers_gone([address], 5.0)
    assert time.monotonic() - started < 1.0
