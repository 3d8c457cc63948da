"""Who this application is, where its files are, and how to start it again.

One name everywhere: the desktop file id, the icon name, the window's WM_CLASS instance
(the launcher passes it as argv[0]) and its Wayland app_id (setDesktopFileName). Every
process the app starts -- engine runs, exports, the Qt probe, the selftest's checks -- is
built by :func:`app_command`, so a frozen (PyInstaller) build is taught only once.

Qt-free and TensorFlow-free: every layer may import it.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

APP_ID = "replica-studio"
CONFIG_DIR_ENV = "REPLICA_STUDIO_CONFIG_DIR"
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)

_HERE = Path(__file__).resolve().parent


def resources_dir() -> Path:
    """The top-level ``resources/`` folder: ``gui_app/resources`` in a wheel, beside the package
    in a source checkout or an editable install, under ``sys._MEIPASS`` in a bundle."""
    candidates = [_HERE / "resources", _HERE.parent / "resources"]
    if hasattr(sys, "_MEIPASS"):
        candidates.insert(0, Path(sys._MEIPASS) / "gui_app" / "resources")
    for path in candidates:
        if path.is_dir():
            return path
    raise FileNotFoundError("the resources folder of Replica Studio is missing from this installation")


def resource_path(*parts: str) -> Path:
    return resources_dir().joinpath(*parts)


def config_dir() -> Path:
    """The user's config folder of the app (settings, hosts), or ``$REPLICA_STUDIO_CONFIG_DIR``
    (the tests use ``tmp_path``)."""
    env = os.environ.get(CONFIG_DIR_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_ID, appauthor=False))


def app_command(*args: str) -> list[str]:
    """``[python, -m, gui_app, *args]``, or the bundle's own executable when frozen. With a
    sub-command (``train``, ``export``, ``predict``, ...) it is an engine process."""
    if getattr(sys, "frozen", False):
        return [sys.executable, *args]
    return [sys.executable, "-m", "gui_app", *args]


def app_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a process started with :func:`app_command`: unbuffered, UTF-8, with
    TensorFlow's C++ logging reduced to warnings (it goes to stderr; stdout carries events).

    From a source checkout that is not installed, ``python -m gui_app`` would not find the
    package outside its folder, so the package's parent goes first on PYTHONPATH (harmless
    when installed or frozen)."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("PYTHONIOENCODING", "utf-8")
    if not getattr(sys, "frozen", False):
        root = str(_HERE.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    if extra:
        env.update(extra)
    return env
