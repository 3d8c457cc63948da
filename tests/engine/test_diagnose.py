"""``replica-studio diagnose`` on real runs: a run diverging under MirroredStrategy over two
logical CPUs (SGD at learning rate 50 on digits) named at its step and replica with the
checkpoint really kept, a healthy run with nothing to say, a detached run frozen with SIGSTOP
named as stalled while it is frozen, and bad input refused in one line with exit code 2."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import config_dict, run_cli, run_in_process, until

from gui_app.core import rundir
from gui_app.core.config import RunConfig
from gui_app.core.live_runs import read_process
from gui_app.engine.commands.cli import build_parser
from gui_app.identity import app_command, app_env

SMALL = {"epochs": 1, "global_batch_size": 64, "seed": 3, "steps_per_call": 2}


def _diagnose(capsys, *argv: str) -> tuple[int, str, str]:
    """``diagnose`` in this process, dispatched as the command line does (its stderr filter left out)."""
    args = build_parser().parse_args(["diagnose", *argv])
    code = args.on_host(args) if args.host is not None else args.handler(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_diverging_mirrored_run_is_named_at_its_step_and_replica(tmp_path, write_config, capsys):
    config = write_config(config_dict(training={**SMALL, "optimizer": "sgd", "learning_rate": 50.0,
                                                "checkpoint_every_steps": 2}))
    code, tap = run_in_process("train", config, tmp_path)
    assert code == 1
    bad_step = int(re.search(r"at step (\d+);", tap.of("error")[0]["message"]).group(1))
    run_dir = rundir.list_runs(tmp_path)[0].path
    code, out, _ = _diagnose(capsys, str(run_dir), "--json")
    assert code == 0
    answer = json.loads(out)
    assert (answer["run"], answer["status"]) == (str(run_dir), "failed")
    (found,) = answer["findings"]
    assert found["kind"] == "non_finite" and found["step"] == bad_step and found["first"] == "loss"
    assert found["replica"] in (0, 1) and found["worker"] == 0 and found["replica"] in found["replicas"]
    # What the events recorded of that replica before it: a climb, every step up to the bad one.
    steps = {e["step"]: e for e in tap.of("step")}
    assert sorted(steps) == list(range(1, bad_step))
    mine = [[s, steps[s]["replicas"][found["replica"]]["grad_norm"]] for s in sorted(steps)]
    assert found["grad_norms"] == mine and found["growth"] > 100 and found["learning_rate"] == 50.0
    # The checkpoint named is the last one written before the trip, its weights finite.
    saved = [e["step"] for e in tap.of("checkpoint")]
    assert saved and saved[-1] < bad_step
    assert found["checkpoint"] == str(run_dir / rundir.CHECKPOINT_DIR / f"ckpt-{saved[-1]}")
    import tensorflow as tf

    reader = tf.train.load_checkpoint(found["checkpoint"])
    weights = [reader.get_tensor(k) for k, dtype in reader.get_variable_to_dtype_map().items() if dtype.is_floating]
    assert weights and all(np.isfinite(w).all() for w in weights)
    code, out, _ = _diagnose(capsys, str(run_dir))
    assert code == 0 and (f"at the same step, {bad_step}" in out or f"at step {bad_step}" in out)
    assert "grew 10^" in out and f"ckpt-{saved[-1]}" in out
    climb = min(found["grad_norms"][:-1], key=lambda p: p[1])[0]
    assert ("from within the climb" in out) == (saved[-1] > climb)


def test_a_healthy_run_has_nothing_to_say(tmp_path, write_config, capsys):
    code, _ = run_in_process("train", write_config(config_dict(training=SMALL)), tmp_path)
    assert code == 0
    run_dir = rundir.list_runs(tmp_path)[0].path
    code, out, _ = _diagnose(capsys, str(run_dir), "--json")
    assert code == 0 and json.loads(out) == {"run": str(run_dir), "status": "completed", "findings": []}
    code, out, _ = _diagnose(capsys, str(run_dir))
    assert out == f"{run_dir}: completed; nothing wrong found.\n"


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    broken = tmp_path / "broken"
    (broken / rundir.EVENTS_FILE).mkdir(parents=True)  # a folder where its events should be
    (broken / rundir.CONFIG_FILE).write_text("{}")
    for argv, said in (([str(tmp_path / "missing")], "is not a run directory"),
                       ([str(tmp_path / "a-file")], "is not a run directory"),
                       ([str(broken)], "cannot read its events"),
                       ([str(broken), "--host", "no such host"], "has no spaces"),
                       ([str(broken), "--host=-oProxyCommand=x"], "does not start with '-'")):
        code, out, err = _diagnose(capsys, *argv)
        assert (code, out) == (2, "") and err.startswith("replica-studio diagnose: ") and said in err, err
        assert err.count("\n") == 1


@pytest.mark.slow
def test_the_command_answers_without_tensorflow(tmp_path):
    """As its own process: one line and exit 2 for bad input, and an answer on a run without
    TensorFlow imported (its time is Python's start and the events' reading)."""
    done = run_cli("diagnose", str(tmp_path))
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    rundir.create_run_dir(tmp_path, RunConfig())
    run_dir = rundir.run_dirs(tmp_path)[0]
    probe = ("import sys, json; from gui_app.engine.commands.cli import main; "
             "code = main(['diagnose', sys.argv[1], '--json']);"
             "print(json.dumps(['tensorflow' in sys.modules, code]))")
    done = subprocess.run([sys.executable, "-c", probe, str(run_dir)], capture_output=True, text=True, timeout=60,
                          env=app_env(), cwd=os.getcwd())
    answer, imported = done.stdout.splitlines()
    assert json.loads(answer)["findings"] == [] and json.loads(imported) == [False, 0], done.stderr


@pytest.mark.slow
def test_a_frozen_run_is_named_as_stalled_while_it_is_frozen(tmp_path):
    config = tmp_path / "long.json"
    config.write_text(json.dumps({"dataset": {"name": "digits"}, "model": {"name": "mlp"},
                                  "training": {"epochs": 200, "global_batch_size": 32, "seed": 1,
                                               "steps_per_call": 1}}))
    done = run_cli("train", str(config), "--runs-dir", str(tmp_path / "runs"), "--detach", timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = Path(done.stdout.strip())
    pid = until(lambda: read_process(run_dir), 60, "process.json").pid
    try:
        # Two epochs done: the time between two epochs (their validation) is known, not only the
        # first one's, which traces the evaluation (diagnosis.py allows 60 s before it is known).
        until(lambda: sum(1 for e in rundir.read_raw_events(run_dir) if e.TYPE == "epoch_end") >= 2, 120,
               "two epochs")

        def diagnose() -> dict:
            done = subprocess.run(app_command("diagnose", str(run_dir), "--json"), capture_output=True, text=True,
                                  timeout=60, env=app_env())
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        assert diagnose()["findings"] == []  # it runs
        os.kill(pid, signal.SIGSTOP)
        frozen = time.monotonic()
        answer = until(lambda: (a := diagnose())["findings"] and a, 90, "stall finding")
        seconds = time.monotonic() - frozen
        (found,) = answer["findings"]
        last = max(e.step for e in rundir.read_raw_events(run_dir) if e.TYPE == "step")
        assert answer["status"] == "running" and found["kind"] == "stall"
        assert (found["pid"], found["state"], found["since_step"]) == (pid, "stopped", last)
        assert f"process {pid} is stopped (SIGSTOP" in found["message"] and f"kill -CONT {pid}" in found["message"]
        print(f"stall named {seconds:.1f} s after the freeze")
        os.kill(pid, signal.SIGCONT)
        steps_then = last
        until(lambda: max(e.step for e in rundir.read_raw_events(run_dir) if e.TYPE == "step") > steps_then, 60,
               "a step after SIGCONT")
        assert diagnose()["findings"] == []  # steps flow again: no stall
    finally:
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_diverging_two_worker_cluster_is_named_where_it_began(tmp_path):
    """Two workers on 127.0.0.1, one CPU replica each: what the chief recorded names the step,
    the replica and its worker, before the step whose loss tripped the guard when the gradients
    went first (seen here: the gradient norm infinite at step 6, the loss at step 8)."""
    config = tmp_path / "mw.json"
    config.write_text(json.dumps({
        "dataset": {"name": "digits"}, "model": {"name": "mlp"}, "runtime": {"cpu_devices": 1},
        "strategy": {"name": "multi_worker_mirrored", "workers": 2},
        "training": {"epochs": 2, "global_batch_size": 64, "seed": 5, "steps_per_call": 5, "optimizer": "sgd",
                     "learning_rate": 50.0}}))
    done = run_cli("train", str(config), "--runs-dir", str(tmp_path / "runs"), "--events", "none", timeout=300)
    assert done.returncode == 1, done.stderr[-3000:]
    tripped = int(re.search(r"the loss became NaN or infinite at step (\d+)", done.stderr).group(1))
    run_dir = rundir.run_dirs(tmp_path / "runs")[0]
    answer = json.loads(run_cli("diagnose", str(run_dir), "--json").stdout)
    (found,) = answer["findings"]
    assert answer["status"] == "failed" and found["kind"] == "non_finite" and found["step"] <= tripped
    steps = [e for e in rundir.read_events(run_dir) if e.TYPE == "step"]
    assert [e.step for e in steps] == list(range(1, found["step"]))  # every finite step before it was told
    assert all(np.isfinite([r.loss, r.grad_norm]).all() for e in steps for r in e.replicas)
    assert found["replica"] in (0, 1) and found["worker"] == found["replica"]  # one replica per worker
    assert found["first"] == ("loss" if found["step"] == tripped else "gradients")
    assert found["grad_norms"] and found["growth"] > 100
    # The chief replayed the run from the seeded initial weights on one device (the other worker
    # waited for it) to the step whose loss tripped the guard, and named the mlp's layer there.
    (event,) = [e for e in rundir.read_events(run_dir) if e.TYPE == "non_finite"]
    assert found["replayed"] is True and event.replay_step is not None and found["step"] <= event.replay_step <= tripped
    assert found["layer"].split("/")[0] in ("dense", "dense_1", "logits")  # mlp's layers (or their variables)
