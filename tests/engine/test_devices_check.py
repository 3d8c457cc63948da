"""``devices --check`` / ``benchmarks/gpu_check.py`` on this machine, which has no GPU: one line,
exit 0, nothing written; and the reading of an engine run's events that each GPU check uses."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from engine_helpers import run_cli

from gui_app.identity import app_env

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_gpu():
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU: the check runs for real (minutes)")


def test_devices_check_without_a_gpu_says_so_in_one_line(tmp_path, no_gpu):
    out = tmp_path / "result.json"
    done = run_cli("devices", "--check", "--check-json", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "gpu check: no GPU here (TensorFlow sees none); nothing to check\n"
    assert not out.exists()
    script = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--json", str(out)],
                            capture_output=True, text=True, timeout=120, env=app_env(), cwd=tmp_path)
    assert script.returncode == 0, script.stderr
    assert script.stdout.splitlines() == ["gpu check: no GPU here (TensorFlow sees none); nothing to check"]
    assert not out.exists() and not os.listdir(tmp_path)


@pytest.mark.slow
def test_a_run_whose_replicas_are_not_on_gpus_fails_its_check(tmp_path):
    """The strategy check reads the real engine's events: a CPU run completes, and is refused
    as a GPU path, naming the step, with its examples/s measured."""
    from gui_app.engine.commands.devices_check import _engine_run, _export, _table

    result, run_dir = _engine_run("one_device", {"name": "one_device", "device": "CPU:0"}, {}, 1, tmp_path)
    assert run_dir is not None and (run_dir / "config.json").is_file()
    assert result["ok"] is False
    assert result["detail"] == "step 1 has not 1 replica statistics on GPUs", result
    assert result["examples_per_s"] > 0
    assert "one_device  FAIL" in _table([result])
    exported = _export(run_dir, tmp_path)  # the export check's own command, on this run
    assert exported["ok"] is True and (tmp_path / "saved" / "saved_model.pb").is_file(), exported
