"""``replica-studio rehearse``: real engine processes trained straight through and interrupted by
a real signal at a step, then resumed; the certificate says whether they are the same run.

Short runs on the bundled digits: 2 epochs of 20 steps, 2 steps per call, a checkpoint every 4
steps, so a SIGKILL loses steps and the resume starts mid-epoch (the data position matters)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import config_dict, run_cli

from gui_app.core.answers import Certificate, decode, problems
from gui_app.engine.training.controller import LOSE_DATA_POSITION_ENV

SHORT = {"epochs": 2, "steps_per_call": 2, "checkpoint_every_steps": 4}
SINGLE = {"strategy": {"name": "default", "devices": []}, "runtime": {"cpu_devices": 1}}


def _rehearse(tmp_path: Path, config: dict, *args: str, env: dict | None = None, timeout: float = 400):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return run_cli("rehearse", str(path), "--runs-dir", str(tmp_path / "runs"), *args, env=env, timeout=timeout)


def _certificate(done) -> Certificate:
    line = json.loads(done.stdout)
    assert problems(Certificate, line) == []
    cert = decode(Certificate, line)
    assert cert is not None
    return cert


def _equivalent(cert: Certificate, at: int) -> None:
    assert cert.equivalent and cert.first_difference is None, cert
    assert cert.steps == 40 and cert.batches_identical and cert.tolerance == "bitwise"
    assert cert.max_loss_diff == 0.0 and cert.max_weight_diff == 0.0 and cert.max_optimizer_diff == 0.0
    assert cert.interrupted_at is not None and cert.interrupted_at >= at
    assert Path(cert.reference_run, "model.keras").is_file() and Path(cert.rehearsed_run, "model.keras").is_file()


@pytest.mark.slow  # three real runs each: 35 s here
def test_mirrored_killed_mid_epoch_is_the_same_run(tmp_path):
    """Two CPU replicas, a warm-up and cosine schedule, SIGKILL after step 7: the resume starts
    from checkpoint 4 or 8 mid-epoch and every step's batches, losses and replicas' figures, the
    optimizer's state and the final weights are bit for bit the reference's."""
    config = config_dict(training={**SHORT, "schedule": "cosine", "warmup_steps": 5})
    done = _rehearse(tmp_path, config, "--at", "7", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    cert = _certificate(done)
    _equivalent(cert, 7)
    assert cert.strategy == "mirrored" and cert.signal == "KILL" and cert.worker is None
    assert cert.resumed_from in (4, 8) and cert.resumed_from <= cert.interrupted_at
    steps = [json.loads(line) for line in Path(cert.rehearsed_run, "events.jsonl").read_text().splitlines()]
    batches = {r["batch"] for e in steps if e["type"] == "step" for r in e["replicas"]}
    assert len(batches) == 80  # every replica of every step trained on its own batch, each named


@pytest.mark.slow  # three real runs each: 35 s here
def test_a_resume_that_loses_its_data_position_is_caught(tmp_path):
    """The test-only hook restarts the resumed epoch from its first batch: the certificate names
    the first step after the checkpoint, its batch, and exit 1."""
    config = config_dict(training=SHORT, **SINGLE)
    done = _rehearse(tmp_path, config, "--at", "7", "--json", env={LOSE_DATA_POSITION_ENV: "1"})
    assert done.returncode == 1, done.stderr[-2000:]
    cert = _certificate(done)
    assert not cert.equivalent and not cert.batches_identical
    assert cert.first_difference is not None and cert.resumed_from is not None
    assert cert.first_difference.step == cert.resumed_from + 1
    assert cert.first_difference.what == "batch of replica 0"
    assert cert.max_loss_diff > 0 and cert.max_weight_diff > 0


@pytest.mark.slow
@pytest.mark.parametrize("signal", ["KILL", "TERM"])
def test_single_process_interrupted_is_the_same_run(tmp_path, signal):
    done = _rehearse(tmp_path, config_dict(training=SHORT, **SINGLE), "--at", "6", "--signal", signal, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    cert = _certificate(done)
    _equivalent(cert, 6)
    if signal == "TERM":  # stopped with a checkpoint of the step it stopped at: nothing is lost
        assert cert.resumed_from == cert.interrupted_at


@pytest.mark.slow
def test_mirrored_terminated_plain_lines(tmp_path):
    done = _rehearse(tmp_path, config_dict(training={**SHORT, "schedule": "step", "step_decay_epochs": 1}),
                     "--at", "9", "--signal", "TERM")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("EQUIVALENT: mirrored, SIGTERM at step 9, 40 steps compared (bitwise)")
    assert "batches identical: yes; max loss difference 0;" in done.stdout


@pytest.mark.slow
def test_cluster_worker_killed_is_the_same_run(tmp_path):
    """A local 2-worker MultiWorkerMirrored cluster, worker 1 killed: the launcher fails the run
    naming the worker, ``resume`` starts the cluster again from its newest checkpoint."""
    config = config_dict(training=SHORT, strategy={"name": "multi_worker_mirrored", "workers": 2, "devices": []},
                         runtime={"cpu_devices": 1})
    done = _rehearse(tmp_path, config, "--at", "7", "--worker", "1", "--json", timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    cert = _certificate(done)
    _equivalent(cert, 7)
    assert cert.worker == 1 and cert.strategy == "multi_worker_mirrored"


@pytest.mark.parametrize("args, message", [
    (["--at", "0"], "--at: a step is 1 or more; got 0"),
    (["--at", "3", "--worker", "1"], "--worker: strategy 'mirrored' trains in one process; leave --worker out"),
])
def test_bad_input_is_one_line(tmp_path, args, message):
    done = _rehearse(tmp_path, config_dict(), *args, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"replica-studio rehearse: {message}") and done.stderr.count("\n") == 1


def test_unreadable_config_and_a_step_beyond_the_run(tmp_path):
    done = run_cli("rehearse", str(tmp_path / "missing.json"), "--at", "3", timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("replica-studio rehearse: config: cannot read")
    done = _rehearse(tmp_path, config_dict(training={"epochs": 1}, **SINGLE), "--at", "1000", timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert done.stderr == "replica-studio rehearse: --at: step 1000 is beyond the run's 20 steps\n"
    assert not list((tmp_path / "runs").iterdir())  # the run started only to learn its steps is gone


def test_parameter_servers_cannot_be_certified(tmp_path):
    config = config_dict(strategy={"name": "parameter_server", "workers": 2, "ps": 1, "devices": []})
    done = _rehearse(tmp_path, config, "--at", "3", "--json", timeout=60)
    assert done.returncode == 1
    cert = _certificate(done)
    assert not cert.equivalent and cert.cannot_certify is not None and "parameter servers" in cert.cannot_certify
    assert not (tmp_path / "runs").exists()  # nothing was trained


@pytest.mark.slow
def test_dropout_and_a_schedule_killed_mid_epoch_is_the_same_run(tmp_path):
    """A user's model with dropout (its random generator's state is a model variable, in
    model.keras and the checkpoint) under a cosine schedule: the resumed run draws the same masks."""
    import keras

    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dropout(0.3), keras.layers.Dense(10)])
    model.save(tmp_path / "dropout.keras")
    config = config_dict(training={**SHORT, "schedule": "cosine"}, model={"name": "keras_file",
                                                                          "path": str(tmp_path / "dropout.keras")},
                         **SINGLE)
    done = _rehearse(tmp_path, config, "--at", "10", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    _equivalent(_certificate(done), 10)


def test_sigterm_stops_the_rehearsals_run_first(tmp_path):
    """The window's Cancel (SIGTERM to the rehearsal): its run is stopped with a checkpoint, not
    orphaned, and the rehearsal exits 130 with one line."""
    import signal
    import subprocess

    from engine_helpers import until

    from gui_app.core import rundir
    from gui_app.identity import app_command, app_env

    path = tmp_path / "config.json"
    path.write_text(json.dumps(config_dict(training={"epochs": 50, "steps_per_call": 2}, **SINGLE)))
    runs = tmp_path / "runs"
    proc = subprocess.Popen(app_command("rehearse", str(path), "--at", "900", "--runs-dir", str(runs)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=app_env())
    try:
        def training() -> Path | None:
            return next((events.parent for events in runs.glob("*/events.jsonl")
                         if '"type":"step"' in events.read_text(errors="replace")), None)

        run_dir = until(training, 180, "the rehearsal's run trains")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert err == "replica-studio rehearse: stopped by SIGTERM; its runs so far are kept\n"
    info = rundir.read_run(run_dir)
    assert info.status == "stopped" and info.resumable


def test_the_random_state_is_checkpointed_and_an_older_checkpoint_still_restores(tmp_path):
    """In-process: a dropout model's seed generator state comes back from the checkpoint; one
    written without it (an older release) restores the rest, with a warning."""
    import keras
    import tensorflow as tf

    from gui_app.core.config import RunConfig
    from gui_app.engine.training import context

    keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dropout(0.3),
                      keras.layers.Dense(10)]).save(tmp_path / "dropout.keras")
    config = RunConfig.from_dict(config_dict(model={"name": "keras_file", "path": str(tmp_path / "dropout.keras")}))
    ctx = context.prepare(config, None, tmp_path / "data")

    def seeds(state) -> list[int]:
        return [int(x) for v in state.model.variables if v.path.endswith("seed_generator_state") for x in v.numpy()]

    written = context.build_model_state(ctx, tmp_path / "new")
    assert written.without_random_state is not None and len(seeds(written)) == 2
    next(v for v in written.model.variables if v.path.endswith("seed_generator_state")).assign([7, 9])
    written.step.assign(3)
    written.manager.save(checkpoint_number=3)
    warnings: list[str] = []
    restored = context.build_model_state(ctx, tmp_path / "new")
    assert context.restore_latest(ctx, restored, warnings) and warnings == []
    assert seeds(restored) == [7, 9] and restored.steps_done() == 3

    tf.train.CheckpointManager(written.without_random_state, str(tmp_path / "old" / "checkpoints"),
                               max_to_keep=1).save(checkpoint_number=3)  # as a release before it wrote them
    older = context.build_model_state(ctx, tmp_path / "old")
    assert context.restore_latest(ctx, older, warnings) and older.steps_done() == 3
    assert warnings == ["checkpoint ckpt-3 holds no random state (written by an older release): the resumed run's "
                        "dropout masks start again, so it differs from an uninterrupted run"]


def test_a_run_that_does_not_ask_names_no_batch(trained_run):
    """``training.batch_fingerprints`` off (the default): the step events are as they were."""
    steps = [json.loads(line) for line in (trained_run / "events.jsonl").read_text().splitlines()
             if '"type":"step"' in line]
    assert steps and all("batch" not in r for s in steps for r in s["replicas"])
