"""Settings: a versioned JSON file in REPLICA_STUDIO_CONFIG_DIR (tmp_path in every test)."""
from __future__ import annotations

import json
from pathlib import Path

from gui_app.ui.settings import (
    MAX_RECENT_RUNS,
    SCHEMA_VERSION,
    Settings,
    load_settings,
    resolve_runs_dir,
    save_settings,
    settings_path,
)


def test_round_trip_in_the_config_dir(isolated_dirs):
    config_dir, _ = isolated_dirs
    settings = Settings(window_geometry="AAAA", last_config={"training": {"epochs": 3}},
                        recent_runs=["/a", "/b"], stop_grace_seconds=12.5, confirm_close_during_run=False)
    save_settings(settings)
    assert settings_path() == config_dir / "settings.json"
    assert json.loads(settings_path().read_text())["schema_version"] == SCHEMA_VERSION
    assert load_settings() == settings


def test_missing_file_gives_defaults():
    assert load_settings() == Settings()


def test_version_1_file_is_migrated():
    settings_path().parent.mkdir(parents=True)
    settings_path().write_text(json.dumps({"schema_version": 1, "geometry": "GEOM", "recent_runs": ["/r"]}))
    loaded = load_settings()
    assert (loaded.window_geometry, loaded.recent_runs, loaded.stop_grace_seconds) == ("GEOM", ["/r"], 30.0)
    assert loaded.schema_version == SCHEMA_VERSION


def test_unreadable_or_newer_files_are_set_aside(isolated_dirs):
    settings_path().parent.mkdir(parents=True)
    for text in ("{not json", json.dumps({"schema_version": SCHEMA_VERSION + 1}), "[1, 2]"):
        settings_path().write_text(text)
        assert load_settings() == Settings()
        assert not settings_path().exists()
        assert settings_path().with_name("settings.json.bad").read_text() == text


def test_bad_values_fall_back_to_defaults_field_by_field():
    settings_path().parent.mkdir(parents=True)
    settings_path().write_text(json.dumps({"schema_version": SCHEMA_VERSION, "stop_grace_seconds": "soon",
                                           "recent_runs": ["/ok", 3], "confirm_close_during_run": False}))
    loaded = load_settings()
    assert loaded.stop_grace_seconds == 30.0
    assert loaded.recent_runs == ["/ok"]
    assert loaded.confirm_close_during_run is False


def test_recent_runs_are_unique_newest_first_and_capped():
    settings = Settings()
    for i in range(MAX_RECENT_RUNS + 3):
        settings.add_recent_run(f"/runs/{i}")
    settings.add_recent_run("/runs/5")
    assert settings.recent_runs[0] == str(Path("/runs/5"))
    assert len(settings.recent_runs) == MAX_RECENT_RUNS
    assert len(set(settings.recent_runs)) == MAX_RECENT_RUNS


def test_runs_dir_precedence(monkeypatch, tmp_path):
    settings = Settings(runs_dir=str(tmp_path / "preferred"))
    assert resolve_runs_dir(settings, tmp_path / "cli") == tmp_path / "cli"
    assert resolve_runs_dir(settings) == tmp_path / "runs"  # REPLICA_STUDIO_RUNS_DIR from conftest
    monkeypatch.delenv("REPLICA_STUDIO_RUNS_DIR")
    assert resolve_runs_dir(settings) == tmp_path / "preferred"
