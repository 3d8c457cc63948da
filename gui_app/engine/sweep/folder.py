"""A sweep's folder: what it holds and the small files a resumed sweep (or ``sweep status``,
``sweep stop``) reads back.

Layout::

    <sweeps dir>/<YYYYmmdd-HHMMSS>-<name>/
        sweep.json       the sweep file, validated, as started
        study.json       where the Optuna study is (storage URL, study name) and when the sweep started
        sweep.log        a detached sweep's lines (``sweep --detach``, ``sweep resume --detach``)
        study.db         the Optuna study (SQLite; a PostgreSQL URL keeps it on the server instead)
        study.journal    the Optuna study of a sweep whose trials are Slurm jobs (Optuna's journal file)
        trials.json      trial number -> its run directory, process, device (written at each change)
        trials/N.json    trial N's run configuration; N.run the run directory its detached start printed,
                         N.log that start's error line (the run logs to its engine.log); N.jsonl the
                         events of a run on an SSH host (its connection's output)
        runs/            the trials' run directories (ordinary runs: open, export, resume each)
        stop             present while a stop was asked (``sweep stop``); ``sweep resume`` removes it
        .lock            held by the sweep's own process while it runs (gui_app.core.run_lock)
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from gui_app.core import atomic_io
from gui_app.core.config_json import ConfigError
from gui_app.core.events import decode_line
from gui_app.core.run_lock import RunInUse, RunLock, holder
from gui_app.core.rundir import new_folder
from gui_app.core.sweep_config import SWEEP_FILE, SweepConfig
from gui_app.core.sweep_runs import SWEEP_RUNS_DIR, TRIALS_FILE

STUDY_FILE = "study.json"
TRIALS_DIR = "trials"
RUNS_DIR = SWEEP_RUNS_DIR  # the run list finds the trials there too (gui_app/core/sweep_runs.py)
STOP_FILE = "stop"
JOURNAL = "journal:"  # a storage "URL" naming Optuna's journal file: journal:/shared/sweeps/X/study.journal
JOURNAL_FILE = "study.journal"


def default_storage(path: Path, sweep: SweepConfig) -> str:
    """Where a new sweep's study goes without ``--storage``: SQLite in its folder, or, for trials
    as Slurm jobs, Optuna's journal file there. Such a folder is on the cluster's shared
    filesystem, where SQLite's locking is not to be trusted (NFS); the journal takes its lock by
    creating a link, atomic there too, and needs no database server (air-gapped clusters)."""
    if sweep.slurm is not None:
        return f"{JOURNAL}{(path / JOURNAL_FILE).resolve()}"
    return f"sqlite:///{(path / 'study.db').resolve()}"

@dataclass
class TrialRecord:
    """What the sweep knows of one trial's process, beside the study."""

    run_dir: str | None = None  # known once the run writes its first event naming it
    pid: int | None = None  # the last process started for it (train, then each resume)
    device: str | None = None  # CUDA_VISIBLE_DEVICES given to it, when the machine has GPUs
    resumes: int = 0
    host: str | None = None  # the SSH host it runs on (its run directory is there); None: this machine
    job: str | None = None  # its Slurm job (a sweep whose trials are Slurm jobs: engine/sweep/slurm_trials.py)


class SweepFolder:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def create(cls, sweeps_dir: Path, name: str, sweep: SweepConfig, storage: str | None) -> SweepFolder:
        path = new_folder(sweeps_dir, f"{time.strftime('%Y%m%d-%H%M%S')}-{name}", "a sweep folder")
        folder = cls(path)
        (path / TRIALS_DIR).mkdir()
        (path / RUNS_DIR).mkdir()
        atomic_io.write_text(path / SWEEP_FILE, sweep.to_json() + "\n")
        storage = storage or default_storage(path, sweep)
        atomic_io.write_text(path / STUDY_FILE, json.dumps(
            {"storage": storage, "study_name": path.name, "started": time.time()}) + "\n")
        return folder

    @classmethod
    def open(cls, path: str | Path) -> SweepFolder:
        folder = cls(path)
        if not (folder.path / SWEEP_FILE).is_file() or not (folder.path / STUDY_FILE).is_file():
            raise ConfigError(f"sweep_dir: {path} is not a sweep folder (no {SWEEP_FILE} and {STUDY_FILE})")
        return folder

    # ---- what it holds --------------------------------------------------------------------
    def sweep(self) -> SweepConfig:
        try:
            return SweepConfig.load(self.path / SWEEP_FILE)
        except ConfigError as exc:
            raise ConfigError(f"{self.path / SWEEP_FILE}: {exc}") from None

    def study(self) -> dict:
        """Where the study is (``storage``, ``study_name``) and when the sweep ``started``.
        A damaged file is one line naming it (exit 2), not an internal error."""
        path = self.path / STUDY_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"sweep_dir: cannot read {path}: {exc.strerror or exc}") from None
        except ValueError:
            raise ConfigError(f"sweep_dir: {path} is damaged (not valid JSON)") from None
        if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("storage", "study_name")):
            raise ConfigError(f"sweep_dir: {path} is damaged (it needs storage and study_name)")
        return data

    @property
    def runs_dir(self) -> Path:
        return self.path / RUNS_DIR

    def trial_file(self, number: int, suffix: str) -> Path:
        return self.path / TRIALS_DIR / f"{number}{suffix}"

    def records(self) -> dict[int, TrialRecord]:
        try:
            data = json.loads((self.path / TRIALS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        known = {f.name for f in fields(TrialRecord)}
        if not isinstance(data, dict):  # damaged: the trials' runs are still found by their events
            return {}
        return {int(number): TrialRecord(**{k: v for k, v in record.items() if k in known})
                for number, record in data.items() if number.isdigit() and isinstance(record, dict)}

    def save_records(self, records: dict[int, TrialRecord]) -> None:
        data = {str(number): asdict(record) for number, record in sorted(records.items())}
        atomic_io.write_text(self.path / TRIALS_FILE, json.dumps(data, indent=1) + "\n")

    def started_trials(self) -> list[int]:
        """The trials whose process named (or may name) a run directory here: a ``trials/N.run``
        or ``trials/N.jsonl`` (found when ``trials.json`` is damaged or was never written)."""
        return sorted({int(path.stem) for suffix in (".run", ".jsonl")
                       for path in (self.path / TRIALS_DIR).glob(f"*{suffix}") if path.stem.isdigit()})

    def run_dir_of(self, number: int) -> str | None:
        """The run directory trial ``number``'s process named, if it has yet: the line its
        ``--detach`` start printed (``trials/N.run``), else, for a run on an SSH host (and a
        folder of an earlier version), the first event naming it in its output (``trials/N.jsonl``)."""
        try:
            lines = self.trial_file(number, ".run").read_text(encoding="utf-8").split("\n")[:-1]
        except OSError:
            lines = []
        if lines and lines[-1].strip():  # (complete lines only: a start may be writing one)
            return lines[-1].strip()
        try:
            with self.trial_file(number, ".jsonl").open("rb") as f:
                for line in f:
                    run_dir = getattr(decode_line(line, parts=False), "run_dir", None)
                    if run_dir:
                        return run_dir
        except OSError:
            pass
        return None

    # ---- the sweep's process and stop requests -------------------------------------------
    def lock(self) -> RunLock:
        """Held by the process that runs the sweep; a second one is refused with one line."""
        try:
            return RunLock(self.path).acquire()
        except RunInUse:
            raise ConfigError(f"sweep_dir: {self.path} is being run by process {self.runner_pid()}") from None

    def runner_pid(self) -> int | None:
        """The process running the sweep now, if one is."""
        return holder(self.path)

    def ask_stop(self) -> None:
        atomic_io.write_text(self.path / STOP_FILE, f"{time.time()}\n")

    @property
    def stop_asked(self) -> bool:
        return (self.path / STOP_FILE).exists()

    def clear_stop(self) -> None:
        (self.path / STOP_FILE).unlink(missing_ok=True)
