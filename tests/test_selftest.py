"""``replica-studio --selftest``: each check against fake engines (fast), the installed
command against the real engine (slow), and a PyInstaller bundle when one is built (bundle)."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gui_app.launcher import selftest
from gui_app.launcher.selftest import CheckFailed

ROOT = Path(__file__).resolve().parents[1]
DEVICES = {"tensorflow": "2.21.0", "keras": "3.15.1", "gpus": [], "cpu": {"name": "CPU:0"}}

# A stand-in engine: answers `devices` with DEVICES and `train` with the events of a short
# run (or what FAKE_RUN says to break), the way gui_app.engine does on stdout.
FAKE_ENGINE = r'''
import json, math, os, sys
from pathlib import Path
command, mode = sys.argv[1], os.environ.get("FAKE_RUN", "good")
if command == "devices":
    if mode == "no-tensorflow":
        sys.stderr.write("Traceback ...\nImportError: libtensorflow_framework.so.2: cannot open shared object file\n")
        sys.exit(1)
    print(json.dumps(DEVICES))
    sys.exit(0)
runs = Path(sys.argv[sys.argv.index("--runs-dir") + 1]) / "run-1"
runs.mkdir(parents=True)
(runs / "model.keras").write_bytes(b"model")
def emit(event_type, **keys):
    print(json.dumps({"type": event_type, "time": 0.0, **keys}))
emit("run_started", run_dir=str(runs), config={}, num_replicas=2, total_steps=3, start_step=0,
     strategy={"name": "mirrored", "cross_device_ops": None})
for step in (1, 2, 3):
    loss = float("nan") if mode == "nan" and step == 2 else 2.0 / step
    emit("step", step=step, loss=loss, examples_per_sec=1000.0,
         replicas=[{"replica": r, "loss": loss} for r in range(2)])
if mode == "failed":
    emit("error", message="dataset.name: the bundled digits file is damaged", kind="input")
    emit("run_finished", status="failed", run_dir=str(runs), step=3, message="damaged")
    sys.exit(2)
matrix = [[30, 6], [4, 20]] if mode != "chance" else [[6, 24], [24, 6]]
emit("eval", loss=0.5, accuracy=(matrix[0][0] + matrix[1][1]) / 60, examples=60, confusion_matrix=matrix,
     class_names=["0", "1"])
emit("run_finished", status="completed", run_dir=str(runs), step=3)
'''.replace("DEVICES", repr(DEVICES))


@pytest.fixture
def fake_engine(tmp_path, monkeypatch):
    script = tmp_path / "fake_engine.py"
    script.write_text(FAKE_ENGINE)

    def use(mode: str = "good"):
        monkeypatch.setenv("FAKE_RUN", mode)
        return lambda *args: [sys.executable, str(script), *args]

    return use


def test_devices_are_read_from_the_engine(fake_engine):
    info = selftest.check_devices(fake_engine())
    assert info["tensorflow"] == "2.21.0"
    assert selftest.describe_devices(info) == "TensorFlow 2.21.0, Keras 3.15.1; no GPU"


def test_a_broken_tensorflow_fails_devices_with_its_reason(fake_engine):
    with pytest.raises(CheckFailed, match=r"^engine exited with code 1: ImportError: libtensorflow_framework"):
        selftest.check_devices(fake_engine("no-tensorflow"))


def test_a_good_run_passes(fake_engine, tmp_path):
    detail = selftest.check_training(DEVICES, tmp_path, fake_engine())
    assert detail == "3 steps on 2 replicas (mirrored), 1,000 examples/s, test accuracy 0.83"
    saved = json.loads((tmp_path / "selftest-config.json").read_text())
    assert saved["strategy"]["devices"] == ["CPU:0", "CPU:1"] and saved["runtime"]["cpu_devices"] == 2


@pytest.mark.parametrize("mode, reason", [
    ("nan", r"step 2: loss nan"),
    ("failed", r"engine exited with code 2: dataset.name: the bundled digits file is damaged"),
    ("chance", r"no better than chance"),
])
def test_a_bad_run_fails_with_one_line(fake_engine, tmp_path, mode, reason):
    with pytest.raises(CheckFailed, match=reason):
        selftest.check_training(DEVICES, tmp_path, fake_engine(mode))


def test_the_first_run_setup_uses_every_gpu_or_two_cpu_replicas():
    gpu = selftest.training_config({"gpus": [{"name": "GPU:0"}, {"name": "GPU:1"}]})
    assert gpu.strategy.name == "mirrored" and gpu.strategy.devices == () and gpu.runtime.cpu_devices == 1
    cpu = selftest.training_config({"gpus": []})
    assert cpu.strategy.devices == ("CPU:0", "CPU:1") and cpu.runtime.cpu_devices == 2
    assert cpu.dataset.name == "digits" and cpu.model.name == "mnist_cnn" and cpu.training.epochs == 1


def test_run_reports_each_check_and_exits_nonzero_with_one_line(fake_engine, capsys, qapp):
    out = io.StringIO()

    code = selftest.run(fake_engine("no-tensorflow"), out=out)

    lines = out.getvalue().splitlines()
    assert code == 1
    assert [line.split()[:2] for line in lines[1:5]] == [["ok", "resources"], ["ok", "qt"], ["FAIL", "devices"],
                                                          ["skip", "train"]]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("replica-studio --selftest: devices: engine exited with code 1")


def test_run_passes_with_a_working_engine(fake_engine, qapp):
    out = io.StringIO()
    assert selftest.run(fake_engine(), out=out) == 0, out.getvalue()
    assert out.getvalue().splitlines()[-1].startswith("Self-test passed")


def _selftest(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, REPLICA_STUDIO_CONFIG_DIR=str(tmp_path / "config"))
    env.pop("QT_QPA_PLATFORM", None)  # the self-test must manage without it
    return subprocess.run([*command, "--selftest"], capture_output=True, text=True, env=env, timeout=900,
                          cwd=tmp_path, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_installed_command_selftest_passes(tmp_path):
    script = Path(os.path.abspath(sys.executable)).parent / "replica-studio"
    if not script.is_file():
        pytest.skip("replica-studio is not installed in this environment (pip install -e .)")
    done = _selftest([str(script)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    checks = [line.split()[:2] for line in done.stdout.splitlines()[1:5]]
    assert checks == [["ok", "resources"], ["ok", "qt"], ["ok", "devices"], ["ok", "train"]], done.stdout


def _bundle() -> Path | None:
    path = Path(os.environ.get("REPLICA_STUDIO_BUNDLE", ROOT / "dist" / "replica-studio" / "replica-studio"))
    return path if path.is_file() else None


@pytest.mark.bundle
@pytest.mark.slow
@pytest.mark.skipif(_bundle() is None, reason="no bundle: run packaging/build_bundle.sh (or set REPLICA_STUDIO_BUNDLE)")
def test_bundle_selftest_passes(tmp_path):
    done = _selftest([str(_bundle())], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bundle" in done.stdout.splitlines()[0]
    assert [line.split()[0] for line in done.stdout.splitlines()[1:5]] == ["ok"] * 4, done.stdout
