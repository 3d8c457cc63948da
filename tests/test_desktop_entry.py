"""The desktop entry: install/uninstall into a temporary XDG folder, a valid .desktop file
whose Exec line starts this installation, and the shipped icons."""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from gui_app.identity import APP_ID, ICON_SIZES, resource_path
from gui_app.launcher import desktop_entry

ROOT = Path(__file__).resolve().parents[1]
VALIDATOR = shutil.which("desktop-file-validate")


def _fields(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "[Desktop Entry]"
    return dict(line.split("=", 1) for line in lines[1:] if line)


def _exec_argv(value: str) -> list[str]:
    """Parse an Exec value the way the Desktop Entry spec says a launcher must."""
    escapes = {"s": " ", "n": "\n", "t": "\t", "r": "\r", "\\": "\\"}  # the string-level escapes
    value = re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(0)), value)
    args, i = [], 0
    while i < len(value):
        if value[i] == " ":
            i += 1
            continue
        if value[i] == '"':
            arg, i = "", i + 1
            while value[i] != '"':
                if value[i] == "\\":
                    i += 1
                arg += value[i]
                i += 1
            i += 1
        else:
            end = value.find(" ", i)
            end = len(value) if end < 0 else end
            arg, i = value[i:end], end
        args.append(arg.replace("%%", "%"))
    return args


def _validate(path: Path) -> None:
    if VALIDATOR:
        done = subprocess.run([VALIDATOR, str(path)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "error" not in done.stdout.lower(), done.stdout


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", data[16:24])


def test_install_writes_the_entry_and_every_icon_size(tmp_path):
    command = ["/opt/replica studio/bin/replica-studio"]
    written = desktop_entry.install(tmp_path, command)

    entry = tmp_path / "applications" / f"{APP_ID}.desktop"
    assert written[0] == entry and len(written) == len(ICON_SIZES) + 2
    fields = _fields(entry)
    assert _exec_argv(fields["Exec"]) == command
    assert fields["TryExec"] == command[0]
    assert fields["Icon"] == APP_ID and fields["StartupWMClass"] == APP_ID
    assert fields["Categories"] == "Development;Science;" and fields["Terminal"] == "false"
    for size in ICON_SIZES:
        assert _png_size(tmp_path / "icons" / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png") == (size, size)
    svg = tmp_path / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg"
    assert svg.read_text().lstrip().startswith("<?xml")
    _validate(entry)


def test_uninstall_removes_exactly_what_install_wrote(tmp_path):
    other = tmp_path / "applications" / "other.desktop"
    other.parent.mkdir(parents=True)
    other.write_text("[Desktop Entry]\n")
    written = desktop_entry.install(tmp_path, ["/usr/bin/replica-studio"])

    removed = desktop_entry.uninstall(tmp_path)

    assert sorted(removed) == sorted(written)
    assert not any(p.exists() for p in written)
    assert other.is_file()
    assert desktop_entry.uninstall(tmp_path) == []


@pytest.mark.skipif(not shutil.which("gtk-update-icon-cache"), reason="needs gtk-update-icon-cache")
def test_an_existing_icon_cache_is_refreshed_not_created(tmp_path):
    desktop_entry.install(tmp_path / "fresh", ["/usr/bin/replica-studio"])
    assert not (tmp_path / "fresh" / "icons" / "hicolor" / "icon-theme.cache").exists()

    cache = tmp_path / "cached" / "icons" / "hicolor" / "icon-theme.cache"
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"stale")
    desktop_entry.install(tmp_path / "cached", ["/usr/bin/replica-studio"])
    assert cache.read_bytes()[:4] == b"\x00\x01\x00\x00"  # GTK icon cache, version 1.0
    assert APP_ID.encode() in cache.read_bytes()


@pytest.mark.parametrize("path", [
    "/home/ann/my apps/replica-studio",
    "/tmp/it's \"quoted\" $HOME `x`/replica-studio",
    "/tmp/back\\slash/100%/replica-studio",
])
def test_exec_line_survives_awkward_paths(tmp_path, path):
    command = [path, "--runs-dir", "/data/runs and more"]
    text = desktop_entry.render_desktop_entry(command)
    entry = tmp_path / "x.desktop"
    entry.write_text(text)

    assert _exec_argv(_fields(entry)["Exec"]) == command
    _validate(entry)


def test_xdg_data_home_must_be_absolute(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert desktop_entry.data_home({"XDG_DATA_HOME": str(tmp_path / "d")}) == tmp_path / "d"
    assert desktop_entry.data_home({"XDG_DATA_HOME": "relative/dir"}) == tmp_path / ".local" / "share"
    assert desktop_entry.data_home({}) == tmp_path / ".local" / "share"


def test_packaging_template_is_the_generated_entry():
    template = ROOT / "packaging" / f"{APP_ID}.desktop"
    assert template.read_text(encoding="utf-8") == desktop_entry.render_desktop_entry([APP_ID])
    _validate(template)


def test_shipped_icons_have_their_sizes():
    icons = resource_path("icons")
    for size in ICON_SIZES:
        assert _png_size(icons / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png") == (size, size)
    ico = (icons / f"{APP_ID}.ico").read_bytes()
    assert struct.unpack("<HHH", ico[:6])[:2] == (0, 1) and struct.unpack("<H", ico[4:6])[0] >= 5
    assert (icons / f"{APP_ID}.icns").read_bytes()[:4] == b"icns"


@pytest.mark.skipif(sys.platform != "linux", reason="freedesktop entries are Linux-only")
def test_installed_command_installs_an_entry_whose_exec_opens_the_window(tmp_path):
    script = Path(os.path.abspath(sys.executable)).parent / "replica-studio"
    if not script.is_file():
        pytest.skip("replica-studio is not installed in this environment (pip install -e .)")
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "data"), QT_QPA_PLATFORM="offscreen",
               REPLICA_STUDIO_CONFIG_DIR=str(tmp_path / "config"), REPLICA_STUDIO_RUNS_DIR=str(tmp_path / "runs"))

    done = subprocess.run([str(script), "--install-desktop-entry"], capture_output=True, text=True, env=env, timeout=60)

    assert done.returncode == 0, done.stderr
    entry = tmp_path / "data" / "applications" / f"{APP_ID}.desktop"
    _validate(entry)
    exec_argv = _exec_argv(_fields(entry)["Exec"])
    assert exec_argv == [str(script)]
    # The Exec line, as a launcher would run it, paints the main window (and quits).
    shown = subprocess.run([*exec_argv, "--measure-startup"], capture_output=True, text=True, env=env,
                           timeout=120, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout.strip().splitlines()[-1])
    assert report["tensorflow_loaded"] is False and 0 < report["since_launch"] < 60

    done = subprocess.run([str(script), "--uninstall-desktop-entry"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 0 and not entry.exists()
