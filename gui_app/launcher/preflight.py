"""Can Qt start here? Answers that never start Qt.

Qt does not raise when it cannot open a window: it prints a message and calls ``abort()``
(exit code 134), and its message about ``xcb-cursor`` is often not the real cause
(docs/architecture.md, "Qt facts"). So before constructing the QApplication, :func:`check_qt` looks at
what Qt is about to need, in milliseconds and in-process:

1. the Qt libraries import (a missing ``libEGL.so.1`` shows up here as an ImportError);
2. the platform plugin Qt will pick (``-platform``, ``$QT_QPA_PLATFORM`` or the session's
   default) exists, and ``dlopen`` of it succeeds, which names a missing system library exactly;
3. for ``xcb`` and ``wayland``, the display server accepts a connection.

A problem found here is confirmed by starting Qt in a child process before anything is
reported (see gui_app.launcher.startup), so a wrong guess can only cost time, never block a working
app. Nothing here constructs a Qt object.
"""
from __future__ import annotations

import ctypes
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

# Debian/Ubuntu packages of the system libraries Qt's wheels expect (docs/architecture.md, "Qt facts").
DEBIAN_PACKAGES = {
    "libGL.so.1": "libgl1", "libEGL.so.1": "libegl1", "libOpenGL.so.0": "libopengl0",
    "libxkbcommon.so.0": "libxkbcommon0", "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libfontconfig.so.1": "libfontconfig1", "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3", "libglib-2.0.so.0": "libglib2.0-0", "libgthread-2.0.so.0": "libglib2.0-0",
    "libX11.so.6": "libx11-6", "libX11-xcb.so.1": "libx11-xcb1", "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0", "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1", "libxcb-image.so.0": "libxcb-image0",
    "libxcb-render-util.so.0": "libxcb-render-util0", "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-xkb.so.1": "libxcb-xkb1", "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0", "libxcb-util.so.1": "libxcb-util1",
    "libwayland-client.so.0": "libwayland-client0", "libwayland-cursor.so.0": "libwayland-cursor0",
    "libwayland-egl.so.1": "libwayland-egl1",
}
_MISSING = (re.compile(r"([\w.+-]+\.so[\w.]*): cannot open shared object file"),  # Linux dlopen
            re.compile(r"Library not loaded: (\S+)"))  # macOS dyld


@dataclass(frozen=True)
class Problem:
    """Why Qt cannot start: ``what`` failed, ``reason`` says why, ``hint`` how to fix it."""

    what: str
    reason: str
    hint: str | None = None

    def message(self) -> str:
        text = f"{self.what}: {self.reason}"
        return f"{text} ({self.hint})" if self.hint else text


def missing_library(error: str) -> str | None:
    """The shared library an ``ImportError``/``OSError`` message says could not be loaded."""
    for pattern in _MISSING:
        match = pattern.search(error)
        if match:
            return os.path.basename(match.group(1))
    return None


def _library_problem(what: str, error: str) -> Problem:
    lib = missing_library(error)
    if lib is None:
        return Problem(what, error.strip().splitlines()[0] if error.strip() else "unknown error")
    package = DEBIAN_PACKAGES.get(lib)
    hint = f"on Debian/Ubuntu: sudo apt install {package}" if package else None
    return Problem(what, f"the system library {lib} is missing", hint)


def check_qt_libraries() -> Problem | None:
    """Import the Qt modules the window needs (this loads their shared libraries)."""
    try:
        import PySide6  # noqa: F401 - imported to see that it loads
    except ImportError as exc:
        return Problem("PySide6", f"not installed for {sys.executable} ({exc})",
                       "pip install 'PySide6-Essentials>=6.8,<6.12'")
    try:
        from PySide6 import QtCore, QtGui, QtWidgets  # noqa: F401 - loaded for their shared libraries
    except ImportError as exc:
        return _library_problem("Qt cannot be loaded", str(exc))
    return None


def platform_candidates(argv: list[str], env: Mapping[str, str] | None = None, system: str = sys.platform) -> list[str]:
    """The platform plugins Qt will try, in order (it uses the first that starts)."""
    env = os.environ if env is None else env
    for i, arg in enumerate(argv):
        if arg in ("-platform", "--platform") and i + 1 < len(argv):
            return _split_platforms(argv[i + 1])
    if env.get("QT_QPA_PLATFORM"):
        return _split_platforms(env["QT_QPA_PLATFORM"])
    if system == "win32":
        return ["windows"]
    if system == "darwin":
        return ["cocoa"]
    # Qt 6.11 on Linux: xcb, preceded by wayland in a Wayland session (measured here).
    if env.get("XDG_SESSION_TYPE") == "wayland" or env.get("WAYLAND_DISPLAY"):
        return ["wayland", "xcb"]
    return ["xcb"]


def _split_platforms(value: str) -> list[str]:
    # "xcb:dpitoxcb=..." carries options after the colon; ";" separates fallbacks.
    return [part.split(":", 1)[0].strip() for part in value.split(";") if part.strip()]


def plugin_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """Folders Qt searches for platform plugins, in Qt's order."""
    env = os.environ if env is None else env
    dirs = [Path(env["QT_QPA_PLATFORM_PLUGIN_PATH"])] if env.get("QT_QPA_PLATFORM_PLUGIN_PATH") else []
    from PySide6.QtCore import QCoreApplication, QLibraryInfo

    roots = [p for p in env.get("QT_PLUGIN_PATH", "").split(os.pathsep) if p]
    roots += QCoreApplication.libraryPaths() + [QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)]
    for root in roots:
        path = Path(root) / "platforms"
        if path not in dirs:
            dirs.append(path)
    return [d for d in dirs if d.is_dir()]


def _plugin_name(file: Path) -> str | None:
    match = re.fullmatch(r"(?:lib)?q([\w-]+)\.(?:so|dll|dylib)", file.name)
    return match.group(1) if match else None


def available_platforms(dirs: list[Path]) -> list[str]:
    return sorted({name for d in dirs for f in d.iterdir() if (name := _plugin_name(f))})


def find_plugin(name: str, dirs: list[Path]) -> Path | None:
    # One library serves several names: libqwayland.so is wayland, wayland-egl and wayland-brcm.
    base = "wayland" if name.startswith("wayland") else name
    for d in dirs:
        for f in sorted(d.iterdir()):
            if _plugin_name(f) == base:
                return f
    return None


def check_platform(name: str, dirs: list[Path], env: Mapping[str, str] | None = None) -> Problem | None:
    """Can the platform plugin ``name`` load, and reach its display server?"""
    env = os.environ if env is None else env
    what = f'Qt platform plugin "{name}"'
    plugin = find_plugin(name, dirs)
    if plugin is None:
        found = ", ".join(available_platforms(dirs)) or "none"
        where = ", ".join(map(str, dirs)) or "no plugin folder"
        return Problem(what, f"not found in {where} (available: {found})")
    try:
        _dlopen(str(plugin))  # resolves every library the plugin links against
    except OSError as exc:
        return _library_problem(f"{what} cannot be loaded", str(exc))
    if name == "xcb":
        return _check_x11(what, env)
    if name.startswith("wayland"):
        return _check_wayland(what, env)
    return None


def _dlopen(path: str) -> None:
    """Load a shared library the way Qt will, raising OSError with the loader's message.

    Not ctypes.CDLL: in a PyInstaller bundle it replaces that message (which names the
    missing library) with a generic one. The handle stays open; Qt loads the plugin next."""
    import _ctypes

    if sys.platform == "win32":
        _ctypes.LoadLibrary(path)
    else:
        _ctypes.dlopen(path, os.RTLD_NOW | os.RTLD_LOCAL)


def _check_x11(what: str, env: Mapping[str, str]) -> Problem | None:
    display = env.get("DISPLAY", "")
    if not display:
        return Problem(what, "no X display: DISPLAY is not set",
                       "start it from a desktop session, or set QT_QPA_PLATFORM=offscreen for headless use")
    try:
        xcb = ctypes.CDLL("libxcb.so.1")
    except OSError as exc:
        return _library_problem(what, str(exc))
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    connection = xcb.xcb_connect(display.encode(), None)
    try:
        failed = not connection or xcb.xcb_connection_has_error(connection)
    finally:
        if connection:
            xcb.xcb_disconnect(connection)
    return Problem(what, f"cannot connect to the X display {display}") if failed else None


def _check_wayland(what: str, env: Mapping[str, str]) -> Problem | None:
    socket = env.get("WAYLAND_DISPLAY") or "wayland-0"
    path = Path(socket) if os.path.isabs(socket) else Path(env.get("XDG_RUNTIME_DIR", "/nonexistent")) / socket
    if not path.exists():
        return Problem(what, f"no Wayland display: {path} does not exist")
    return None


def check_qt(argv: list[str], env: Mapping[str, str] | None = None) -> Problem | None:
    """None when Qt should start with these arguments; else the problem of the first
    candidate platform (the one the user most likely expects)."""
    problem = check_qt_libraries()
    if problem is not None:
        return problem
    dirs = plugin_dirs(env)
    problems = []
    for name in platform_candidates(argv, env):
        problem = check_platform(name, dirs, env)
        if problem is None:
            return None
        problems.append(problem)
    return problems[0] if problems else Problem("Qt", "no platform plugin was requested")


def explain_qt_failure(message: str, argv: list[str], env: Mapping[str, str] | None = None,
                       earlier: Sequence[str] = ()) -> str:
    """What really failed when Qt aborted saying ``message`` (``earlier``: what Qt said before
    it), Qt's words after it. Qt's last words are "no Qt platform plugin could be initialized",
    after "xcb-cursor0 or libxcb-cursor0 is needed" -- also with that library installed, when the
    X display refused the connection (seen here: "could not connect to display :42" came
    first). So the checks run again now, and what Qt said about the display counts."""
    said = message.strip().splitlines()[0] if message.strip() else "no message"
    problem = check_qt(argv, env)
    if problem is not None:
        return f"{problem.message()} (Qt said: {said})"
    display = next((line for line in earlier if "could not connect to display" in line), None)
    if display is not None:
        return f"the display connection failed: {display} (Qt said: {said})"
    if any("xcb-cursor" in line for line in (*earlier, said)) and _loads("libxcb-cursor.so.0"):
        return (f"Qt's xcb plugin did not start, although libxcb-cursor0 is installed: the X display "
                f"probably refused or dropped the connection (Qt said: {said})")
    return said


def _loads(library: str) -> bool:
    try:
        _dlopen(library)
    except OSError:
        return False
    return True
