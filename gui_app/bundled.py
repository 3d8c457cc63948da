"""Locate files of the top-level ``resources/`` folder.

An installed wheel carries them as ``gui_app/resources/``; a source checkout or an editable
install finds them beside the package. PyInstaller bundles put them under ``sys._MEIPASS``.
"""
from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def resources_dir() -> Path:
    candidates = [_HERE / "resources", _HERE.parent / "resources"]
    if hasattr(sys, "_MEIPASS"):
        candidates.insert(0, Path(sys._MEIPASS) / "gui_app" / "resources")
    for path in candidates:
        if path.is_dir():
            return path
    raise FileNotFoundError("the resources folder of Replica Studio is missing from this installation")


def resource_path(*parts: str) -> Path:
    return resources_dir().joinpath(*parts)
