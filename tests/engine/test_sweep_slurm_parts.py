"""A sweep whose trials are Slurm jobs, without a cluster: where its study goes (Optuna's journal
file in the sweep folder), the one-line refusals before anything is made, and how a sweep started
again takes up its trials' jobs by the ids it recorded, over fake Slurm commands that print what
the real ones print (tests/fake_slurm.py). The real Slurm: tests/engine/test_sweep_slurm.py."""
from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from gui_app.core.backends import slurm
from gui_app.core.sweep_config import SweepConfig
from gui_app.engine.commands.cli import main as cli_main
from gui_app.engine.sweep import study as studies
from gui_app.engine.sweep.driver import SweepDriver
from gui_app.engine.sweep.folder import SweepFolder
from gui_app.engine.sweep.status import as_text, trial_rows
from tests.fake_slurm import FakeSlurm

BASE = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
        "strategy": {"name": "multi_worker_mirrored", "workers": 1}, "training": {"epochs": 3}}
SWEEP = {"base": BASE, "parameters": {"training.learning_rate": {"choice": [0.01, 0.003, 0.001]}},
         "method": "grid", "trials": 3, "parallel": 3, "slurm": {"cpus_per_task": 2, "partition": "gpu"}}


def _sweep(**keys) -> SweepConfig:
    return SweepConfig.from_dict({**SWEEP, **keys})


def _study(folder: SweepFolder, sweep: SweepConfig, create: bool = False) -> optuna.Study:
    info = folder.study()
    return studies.load(sweep, info["storage"], info["study_name"], create=create)


def test_a_slurm_sweep_keeps_its_study_in_a_journal_file_in_its_folder(tmp_path):
    sweep = _sweep()
    folder = SweepFolder.create(tmp_path, "lr", sweep, None)
    assert folder.study()["storage"] == f"journal:{folder.path.resolve() / 'study.journal'}"
    study = _study(folder, sweep, create=True)
    trial = study.ask()
    studies.suggest(trial, sweep)
    study.tell(trial, 0.75)
    again = _study(folder, sweep)  # another process (sweep status, a resume) reads the same file
    assert [(t.state.name, t.value) for t in again.trials] == [("COMPLETE", 0.75)]
    assert (folder.path / "study.journal").stat().st_size > 0 and not (folder.path / "study.db").exists()
    local = SweepConfig.from_dict({**SWEEP, "base": {**BASE, "strategy": {"name": "default"}}, "slurm": None})
    assert SweepFolder.create(tmp_path, "here", local, None).study()["storage"].startswith("sqlite:///")
    given = "postgresql://sweeper@db.example/sweeps"
    assert SweepFolder.create(tmp_path, "pg", sweep, given).study()["storage"] == given  # --storage wins


def _write(tmp_path: Path, **keys) -> Path:
    path = tmp_path / "lr.json"
    path.write_text(json.dumps({**SWEEP, **keys}))
    return path


@pytest.mark.parametrize("storage, message", [
    ("journal:{tmp}/no/such/folder/study.journal",
     "--storage: cannot write the journal file {tmp}/no/such/folder/study.journal: its folder does not exist"),
    ("journal:{tmp}", "--storage: journal:{tmp}: needs a journal file's path"),
])
def test_a_journal_path_that_cannot_be_written_is_one_line(tmp_path, capfd, monkeypatch, storage, message):
    monkeypatch.setenv("PATH", FakeSlurm(tmp_path / "slurm").path())  # (its commands are there)
    code = cli_main(["sweep", str(_write(tmp_path)), "--sweeps-dir", str(tmp_path / "sweeps"),
                     "--storage", storage.format(tmp=tmp_path)])
    err = capfd.readouterr().err
    assert code == 2 and err.startswith(f"replica-studio sweep: {message.format(tmp=tmp_path)}"), err
    assert err.count("\n") == 1 and not (tmp_path / "sweeps").exists()  # nothing made


def test_without_slurm_commands_a_slurm_sweep_is_one_line(tmp_path, capfd, monkeypatch):
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert cli_main(["sweep", str(_write(tmp_path)), "--sweeps-dir", str(tmp_path / "sweeps")]) == 2
    assert capfd.readouterr().err == ("replica-studio sweep: slurm: sbatch, squeue, scancel, scontrol not found on "
                                      "PATH: a sweep whose trials are Slurm jobs runs on a Slurm login node\n")
    assert not (tmp_path / "sweeps").exists()


def test_a_sweep_started_again_takes_up_its_jobs_by_id_and_submits_only_what_no_job_runs(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path / "slurm")
    monkeypatch.setenv("PATH", fake.path())
    sweep = _sweep()
    folder = SweepFolder.create(tmp_path, "lr", sweep, None)
    lines: list[str] = []
    first = SweepDriver(folder, sweep, _study(folder, sweep, create=True), lines.append)
    while first._start_next():
        pass
    assert [call[0] for call in fake.calls("sbatch")] == ["sbatch"] * 3
    records = folder.records()
    assert [records[n].job for n in range(3)] == ["41", "42", "43"]
    script = Path(records[0].run_dir, "job.sbatch").read_text()
    assert "#SBATCH --partition=gpu" in script and "#SBATCH --cpus-per-task=2" in script
    assert f"#SBATCH --job-name=rs-sweep-{folder.path.name}-trial-0" in script

    # The sweep's process is killed. Trial 0's record lost its job (killed between sbatch and the
    # record: its run directory still names it); trial 1's job was cancelled before it ran; trial
    # 2's job runs, and the sweep had decided to prune it.
    records[0].job = None
    folder.save_records(records)
    fake.set("42", "CANCELLED")
    fake.set("43", "RUNNING")
    study = _study(folder, sweep)
    studies.trial(study, 2).set_user_attr("pruned_at", 1)
    said: list[str] = []
    again = SweepDriver(folder, sweep, study, said.append)
    again._take_up_open_trials()
    assert fake.calls("scancel") == [["scancel", "43"]] and fake.state("43") == "CANCELLED"  # its pruning goes on
    assert [a.number for a in again.active] == [0, 2] and [a.number for a in again.waiting] == [1]
    assert again.records[0].job == "41" and len(fake.calls("sbatch")) == 3  # nothing submitted twice
    assert said[:2] == ["trial 0 is Slurm job 41 (pending (Priority)): following it again",
                        "trial 2 is Slurm job 43 (running): following it again"]
    assert again._start_next() and len(fake.calls("sbatch")) == 4  # trial 1, submitted again
    assert slurm.read_job(again.records[1].run_dir).earlier == ("42",)
    assert said[-1].startswith("trial 1 submitted again as Slurm job 44")
    assert not again._start_next()  # the budget is spent: 3 trials, 3 run directories
    assert len(list(folder.runs_dir.iterdir())) == 3

    rows = trial_rows(folder, _study(folder, sweep), sweep.metric)
    assert [(r.state, r.job, r.job_state) for r in rows] == [
        ("running", "41", "pending (Priority)"), ("running", "44", "pending (Priority)"),
        ("pruned", "43", "cancelled")]
    assert "(Slurm job 44: pending (Priority))" in as_text(rows, sweep.metric, sweep.direction)

    again._stop_all()  # sweep stop, pruning: scancel of each job (its workers stop with a checkpoint)
    assert sorted(call[1] for call in fake.calls("scancel")[1:]) == ["41", "43", "44"]
    assert {fake.state(job) for job in ("41", "43", "44")} == {"CANCELLED"}


def test_sweep_stop_with_no_sweep_process_cancels_the_jobs_slurm_still_runs(tmp_path, monkeypatch, capfd):
    fake = FakeSlurm(tmp_path / "slurm")
    monkeypatch.setenv("PATH", fake.path())
    sweep = _sweep(trials=2, parallel=2)
    folder = SweepFolder.create(tmp_path, "lr", sweep, None)
    driver = SweepDriver(folder, sweep, _study(folder, sweep, create=True), lambda line: None)
    while driver._start_next():
        pass
    fake.set("41", "RUNNING")
    fake.set("42", "COMPLETED")  # (ended while the sweep was away: nothing to cancel)
    assert cli_main(["sweep", "stop", str(folder.path)]) == 0  # the sweep's process was killed
    assert fake.calls("scancel") == [["scancel", "41"]] and fake.state("41") == "CANCELLED"
    assert capfd.readouterr().out.startswith("stopped; replica-studio sweep resume")
