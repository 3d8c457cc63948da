"""Startup failures are never silent: a plain message (stderr and a desktop dialog tool) when
Qt cannot start, a Qt dialog when Qt starts but the app cannot."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gui_app.launcher import preflight, startup

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fake_desktop(tmp_path):
    """An environment whose PATH has a zenity that records its arguments, with a display
    variable set and stderr not a terminal: what a double-click looks like to the app."""
    bin_dir, log = tmp_path / "bin", tmp_path / "zenity.log"
    bin_dir.mkdir()
    zenity = bin_dir / "zenity"
    zenity.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{log}"\n')
    zenity.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(ROOT),
               REPLICA_STUDIO_CONFIG_DIR=str(tmp_path / "config"), REPLICA_STUDIO_RUNS_DIR=str(tmp_path / "runs"))
    return env, log


def _launch(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gui_app", *args], capture_output=True, text=True, env=env,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_missing_platform_plugin_is_a_plain_message_not_an_abort(fake_desktop):
    env, zenity_log = fake_desktop
    env.update(QT_QPA_PLATFORM="nonexistent", DISPLAY=":99")

    done = _launch(env)

    assert done.returncode == startup.EXIT_CANNOT_START  # not 134: Qt never aborted this process
    first = done.stderr.splitlines()[0]
    assert first.startswith('replica-studio: cannot start: Qt platform plugin "nonexistent": not found')
    assert "offscreen" in first  # the plugins that do exist
    shown = zenity_log.read_text()
    assert "--error" in shown and 'Qt platform plugin "nonexistent"' in shown


@pytest.mark.skipif(sys.platform != "linux", reason="X11 is Linux-only")
def test_xcb_without_a_display_names_what_is_missing(fake_desktop):
    env, zenity_log = fake_desktop
    env["QT_QPA_PLATFORM"] = "xcb"

    done = _launch(env)

    assert done.returncode == startup.EXIT_CANNOT_START
    # DISPLAY, or on a machine without the X libraries the library that is missing.
    assert ("DISPLAY is not set" in done.stderr) or ("is missing" in done.stderr), done.stderr
    assert not zenity_log.exists()  # no display: nothing graphical to try


def test_a_qt_fatal_error_the_preflight_missed_is_still_reported(fake_desktop):
    env, zenity_log = fake_desktop
    env.update(QT_QPA_PLATFORM="nonexistent", DISPLAY=":99")
    code = "from gui_app.launcher.startup import create_application; create_application([])"

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)

    assert done.returncode != 0  # Qt aborts; the handler has spoken first
    # What really failed first, then Qt's own words.
    line = next(line for line in done.stderr.splitlines() if line.startswith("replica-studio: cannot start:"))
    assert line.startswith('replica-studio: cannot start: Qt failed to start: Qt platform plugin "nonexistent": '
                           'not found'), line
    assert "(Qt said: This application failed to start" in line
    assert "--error" in zenity_log.read_text()


@pytest.mark.skipif(sys.platform != "linux", reason="X11 is Linux-only")
def test_qts_xcb_cursor_message_is_not_taken_for_the_cause():
    """Qt 6.5+ blames xcb-cursor0 whenever its xcb plugin does not start: a display that refused
    the connection was reported as a library to reinstall."""
    said = ("From 6.5.0, xcb-cursor0 or libxcb-cursor0 is needed to load the Qt xcb platform plugin.\n"
            "Reinstalling the application may fix this problem.")
    text = preflight.explain_qt_failure(said, ["-platform", "xcb"], {"DISPLAY": ":98"})
    # The display, or on a machine without the X libraries the one that is missing, comes first.
    assert text.startswith(('Qt platform plugin "xcb": cannot connect to the X display :98',
                            'Qt platform plugin "xcb" cannot be loaded: the system library')), text
    assert text.endswith("(Qt said: From 6.5.0, xcb-cursor0 or libxcb-cursor0 is needed to load the Qt xcb "
                         "platform plugin.)")


def test_what_qt_said_about_the_display_before_it_gave_up_is_the_cause():
    """As seen under Xvfb: the display went away between the check and Qt's start."""
    earlier = ["could not connect to display :42",
               "From 6.5.0, xcb-cursor0 or libxcb-cursor0 is needed to load the Qt xcb platform plugin."]
    fatal = "This application failed to start because no Qt platform plugin could be initialized."
    text = preflight.explain_qt_failure(fatal, ["-platform", "offscreen"], earlier=earlier)  # it passes now
    assert text == f"the display connection failed: could not connect to display :42 (Qt said: {fatal})"


def test_probe_in_a_child_confirms_or_clears_a_suspicion(monkeypatch):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    assert startup.probe_qt_in_child([]) is None
    said = startup.probe_qt_in_child(["-platform", "nonexistent"])
    assert said is not None and "no Qt platform plugin could be initialized" in said


@pytest.mark.parametrize("argv, env, system, expected", [
    ([], {}, "linux", ["xcb"]),
    ([], {"XDG_SESSION_TYPE": "wayland"}, "linux", ["wayland", "xcb"]),
    ([], {"QT_QPA_PLATFORM": "wayland;xcb:dpitoxcb=1"}, "linux", ["wayland", "xcb"]),
    (["-platform", "offscreen"], {"QT_QPA_PLATFORM": "xcb"}, "linux", ["offscreen"]),
    (["--platform", "vnc"], {}, "linux", ["vnc"]),
    ([], {}, "win32", ["windows"]),
    ([], {}, "darwin", ["cocoa"]),
])
def test_platform_candidates_follow_qt(argv, env, system, expected):
    assert preflight.platform_candidates(argv, env, system) == expected


def test_a_missing_library_is_named_with_its_package():
    error = "libxcb-cursor.so.0: cannot open shared object file: No such file or directory"
    assert preflight.missing_library(error) == "libxcb-cursor.so.0"
    assert preflight.missing_library("dlopen(x): Library not loaded: @rpath/QtGui.framework/QtGui") == "QtGui"
    assert preflight.missing_library("some other failure") is None
    message = preflight._library_problem('Qt platform plugin "xcb" cannot be loaded', error).message()
    assert message == ('Qt platform plugin "xcb" cannot be loaded: the system library libxcb-cursor.so.0 is missing '
                       "(on Debian/Ubuntu: sudo apt install libxcb-cursor0)")


@pytest.fixture
def broken_plugin(tmp_path):
    """A copy of Qt's offscreen plugin that links against a library no system has
    (libQt6Gui.so.6 renamed to libQt6Gxx.so.6): a platform plugin with a missing dependency."""
    if sys.platform != "linux":
        pytest.skip("patches an ELF file")
    original = preflight.find_plugin("offscreen", preflight.plugin_dirs())
    data = original.read_bytes()
    assert data.count(b"libQt6Gui.so.6\0") == 1
    platforms = tmp_path / "plugins" / "platforms"
    platforms.mkdir(parents=True)
    (platforms / "libqbroken.so").write_bytes(data.replace(b"libQt6Gui.so.6\0", b"libQt6Gxx.so.6\0"))
    return tmp_path / "plugins"


def test_a_plugin_missing_a_library_is_reported_by_the_librarys_name(broken_plugin, fake_desktop):
    problem = preflight.check_platform("broken", [broken_plugin / "platforms"], {})
    assert problem is not None and problem.reason == "the system library libQt6Gxx.so.6 is missing"

    env, zenity_log = fake_desktop
    env.update(QT_QPA_PLATFORM="broken", QT_PLUGIN_PATH=str(broken_plugin), DISPLAY=":99")
    done = _launch(env)

    assert done.returncode == startup.EXIT_CANNOT_START
    assert done.stderr.startswith('replica-studio: cannot start: Qt platform plugin "broken" cannot be loaded: '
                                  "the system library libQt6Gxx.so.6 is missing")
    assert "libQt6Gxx.so.6" in zenity_log.read_text()


def test_offscreen_passes_the_preflight():
    assert preflight.check_qt(["-platform", "offscreen"]) is None


def _answer_dialog(qtbot, seen: list[str]):
    """Record the next modal dialog's text and close it (it blocks otherwise)."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    def close() -> None:
        box = QApplication.activeModalWidget()
        if box is None:
            QTimer.singleShot(10, close)
            return
        seen.append(f"{box.text()}\n{box.informativeText()}\n{box.detailedText()}")
        box.done(0)

    QTimer.singleShot(0, close)


def test_tensorflow_missing_is_a_dialog(qtbot, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorflow" else real_find_spec(name, *a))
    seen: list[str] = []
    _answer_dialog(qtbot, seen)

    assert startup.launch_gui(["-platform", "offscreen"]) == startup.EXIT_CANNOT_START

    assert len(seen) == 1 and "TensorFlow is not installed" in seen[0] and "pip install" in seen[0]


def test_a_broken_ui_is_a_dialog_with_the_reason(qtbot, monkeypatch):
    # "import gui_app.ui.application" raises ImportError:
    monkeypatch.setitem(sys.modules, "gui_app.ui.application", None)
    seen: list[str] = []
    _answer_dialog(qtbot, seen)

    assert startup.launch_gui(["-platform", "offscreen"]) == startup.EXIT_CANNOT_START

    assert len(seen) == 1 and seen[0].startswith("ModuleNotFoundError: import of gui_app.ui.application halted")
    assert "Traceback" in seen[0]


def test_frozen_builds_give_system_programs_the_users_library_path(monkeypatch):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setenv("LD_LIBRARY_PATH", "/bundle/_internal")
    monkeypatch.setenv("LD_LIBRARY_PATH_ORIG", "/opt/lib")
    assert startup.system_env()["LD_LIBRARY_PATH"] == "/opt/lib"
    monkeypatch.delenv("LD_LIBRARY_PATH_ORIG")
    assert "LD_LIBRARY_PATH" not in startup.system_env()


def test_a_broken_tensorflow_found_after_startup_is_a_dialog(qtbot):
    from gui_app.ui.shell import show_tensorflow_unavailable

    seen: list[str] = []
    _answer_dialog(qtbot, seen)
    show_tensorflow_unavailable("ImportError: libtensorflow_framework.so.2: cannot open shared object file")

    assert len(seen) == 1 and "libtensorflow_framework.so.2" in seen[0]
    assert f"{sys.executable} -m gui_app devices --debug" in seen[0]
