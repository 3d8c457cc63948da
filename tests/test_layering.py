"""The house rules (docs/architecture.md): layers, Qt-free core and engine, a window that never
reaches TensorFlow (imports inside functions count), no import cycles, small modules.

The contracts live in pyproject.toml and are checked by import-linter's own ``lint-imports``;
the tests here add what it cannot say: that the whole core stays in the TensorFlow-free
contract, that nothing imports TensorFlow at import time, and the module size limit.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gui_app"
MAX_LINES = 400


def _lint_imports() -> str:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "lint-imports is missing: install the test extra (pip install -e '.[test]')"
    done = subprocess.run([exe, "--no-logo", "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    return done.stdout


def test_import_contracts_are_kept():
    out = _lint_imports()
    assert "0 broken" in out and "Contracts: 5 kept" in out, out


def _tensorflow_free_contract() -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if "tensorflow" in c.get("forbidden_modules", []))


def test_the_whole_core_is_held_tensorflow_free():
    """The contract names gui_app.core as one package: TensorFlow-side code (training, datasets,
    export) lives in gui_app.engine, and a new core module is TensorFlow-free by rule."""
    listed = set(_tensorflow_free_contract()["source_modules"])
    assert {"gui_app.core", "gui_app.ui", "gui_app.launcher"} <= listed
    assert not any(name.startswith("gui_app.core.") for name in listed), "name the core once, as a whole"
    # Packages only: a checkout that pulled the move may keep their stale __pycache__ folders.
    packages = {p.name for p in (PACKAGE / "core").iterdir() if (p / "__init__.py").is_file()}
    assert not {"training", "datasets", "export"} & packages


def test_modules_stay_small():
    big = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not big, f"split these modules (over {MAX_LINES} lines): {big}"


def _modules(*parts: str) -> list[str]:
    names = []
    for path in sorted(PACKAGE.joinpath(*parts).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        if rel.name == "__main__":
            continue  # runs the command line on import
        names.append(".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts))
    return names


def test_nothing_imports_tensorflow_at_import_time():
    """TensorFlow-side modules too import it inside the functions that need it, so the
    command line answers ``--help`` or a bad config before TensorFlow's 3 s start."""
    modules = _modules("core") + _modules("engine") + _modules("ui") + _modules("launcher") + ["gui_app.app"]
    script = f"""
import importlib, json, sys
result = {{}}
for name in {modules!r}:
    try:
        importlib.import_module(name)
    except Exception as exc:  # an optional extra that is not installed
        result[name] = f"import failed: {{type(exc).__name__}}: {{exc}}"
        continue
    if "tensorflow" in sys.modules or "keras" in sys.modules:
        result[name] = "tensorflow"
        break
print(json.dumps(result))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    heavy = [name for name, what in result.items() if what == "tensorflow"]
    assert not heavy, f"importing {heavy[0]} imports TensorFlow; import it inside the function that needs it"
    broken = {name: what for name, what in result.items() if not name.startswith("gui_app.engine.datasets")}
    assert not broken, broken
