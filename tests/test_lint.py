"""The linters find nothing: ruff with the rules in pyproject.toml (pycodestyle, pyflakes,
bugbear, import order, blind excepts, names, and no noqa without its rule or its finding) over
the package, the tests, the benchmarks and the packaging scripts; and mypy, configured there,
over the engine, the Qt-free core and the launcher."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    exe = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert exe, f"{name} is missing: install the test extra (pip install -e '.[test]')"
    return exe


def test_ruff_finds_nothing():
    done = subprocess.run([_tool("ruff"), "check", "--no-cache", "gui_app", "tests", "benchmarks", "packaging"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_mypy_finds_nothing():
    done = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
