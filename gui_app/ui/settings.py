"""Settings that persist between launches: a versioned JSON file in the user config folder.

``$REPLICA_STUDIO_CONFIG_DIR`` points the folder elsewhere (the tests use ``tmp_path``).
The file carries a ``schema_version``; older files are upgraded by the ordered
``_MIGRATIONS`` (napari's scheme), newer or unreadable ones are set aside, never crash the
app. Writes are atomic (temporary file + rename) so a crash mid-save keeps the old file.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gui_app.identity import config_dir

SETTINGS_FILE = "settings.json"
SCHEMA_VERSION = 2
MAX_RECENT_RUNS = 10

log = logging.getLogger(__name__)


@dataclass
class Settings:
    schema_version: int = SCHEMA_VERSION
    window_geometry: str | None = None  # QMainWindow.saveGeometry(), base64
    window_state: str | None = None  # QMainWindow.saveState(), base64 (toolbars, docks)
    splitter_state: str | None = None
    last_config: dict[str, Any] | None = None  # RunConfig.to_dict() of the last form state that passed its checks
    last_config_checked: bool = False  # written by a version that keeps only checked configs
    recent_runs: list[str] = field(default_factory=list)  # newest first
    runs_dir: str | None = None  # None: REPLICA_STUDIO_RUNS_DIR or the platform default
    stop_grace_seconds: float = 30.0  # how long a stop may take before the engine is killed
    confirm_close_during_run: bool = True
    last_open_dir: str | None = None  # where file dialogs start
    last_export_dir: str | None = None  # where the export dialog proposes to save
    last_mlflow_target: str | None = None  # the MLflow tracking folder or URI File -> Export run to MLflow… proposes
    notify_when_run_ends: bool = True  # a desktop notification while the window is not the active one
    run_on: str | None = None  # the SSH host of hosts.json the window's jobs run on; None: this computer

    def add_recent_run(self, run_dir: str | Path) -> None:
        path = str(Path(run_dir))
        self.recent_runs = [path] + [p for p in self.recent_runs if p != path]
        del self.recent_runs[MAX_RECENT_RUNS:]


def resolve_runs_dir(settings: Settings, override: str | Path | None = None) -> Path:
    """--runs-dir, else $REPLICA_STUDIO_RUNS_DIR, else the preference, else the platform default."""
    from gui_app.core.rundir import RUNS_DIR_ENV, default_runs_dir

    if override:
        return Path(override).expanduser()
    if not os.environ.get(RUNS_DIR_ENV) and settings.runs_dir:
        return Path(settings.runs_dir).expanduser()
    return default_runs_dir()


def settings_path() -> Path:
    return config_dir() / SETTINGS_FILE


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    # Version 1 kept the geometry under "geometry" and had no stop grace period.
    data = dict(data)
    if "geometry" in data:
        data["window_geometry"] = data.pop("geometry")
    data.setdefault("stop_grace_seconds", 30.0)
    return data


# _MIGRATIONS[n] upgrades a version n+1 file to version n+2.
_MIGRATIONS: list[Callable[[dict[str, Any]], dict[str, Any]]] = [_v1_to_v2]
assert len(_MIGRATIONS) == SCHEMA_VERSION - 1


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"schema_version must be a positive integer; got {version!r}")
    if version > SCHEMA_VERSION:
        raise ValueError(f"written by a newer Replica Studio (schema {version} > {SCHEMA_VERSION})")
    for upgrade in _MIGRATIONS[version - 1:]:
        data = upgrade(data)
    data["schema_version"] = SCHEMA_VERSION
    return data


def _from_dict(data: dict[str, Any]) -> Settings:
    defaults = Settings()
    values = {}
    for f in dataclasses.fields(Settings):
        if f.name not in data:
            continue
        value, default = data[f.name], getattr(defaults, f.name)
        # Keep a field only when its type matches the default's (None-able fields take anything
        # JSON-shaped that is the right kind); a hand-edited bad value falls back to the default.
        if default is None or value is None or type(value) is type(default) or (
                isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool)):
            values[f.name] = value
        else:
            log.warning("settings: ignoring %s=%r (expected %s)", f.name, value, type(default).__name__)
    settings = Settings(**values)
    settings.recent_runs = [str(p) for p in settings.recent_runs if isinstance(p, str)][:MAX_RECENT_RUNS]
    if not (isinstance(settings.stop_grace_seconds, (int, float)) and settings.stop_grace_seconds > 0):
        settings.stop_grace_seconds = 30.0
    return settings


def load_settings(path: str | Path | None = None) -> Settings:
    """The saved settings, or defaults when there are none or they cannot be read."""
    path = Path(path) if path else settings_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Settings()
    except OSError as exc:
        log.warning("settings: cannot read %s: %s; using defaults", path, exc.strerror or exc)
        return Settings()
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return _from_dict(migrate(data))
    except ValueError as exc:
        backup = path.with_name(path.name + ".bad")
        log.warning("settings: %s is unusable (%s); moved to %s, using defaults", path, exc, backup.name)
        try:
            os.replace(path, backup)
        except OSError:
            pass
        return Settings()


def save_settings(settings: Settings, path: str | Path | None = None) -> None:
    path = Path(path) if path else settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(dataclasses.asdict(settings), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
