"""The layers of design.md section 1: core and engine never import Qt or the UI, and nothing
the window needs at startup imports TensorFlow (the window must appear before it loads)."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gui_app"
FORBIDDEN_IN_CORE = ("PySide6", "pyqtgraph", "gui_app.ui", "shiboken6")


def _modules(*parts: str) -> list[tuple[str, Path]]:
    root = PACKAGE.joinpath(*parts)
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        if rel.name == "__main__":
            continue  # runs the command line on import
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        found.append((name, path))
    return found


def _imported_names(path: Path) -> list[tuple[int, str]]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append((node.lineno, node.module))
    return names


@pytest.mark.parametrize("layer", ["core", "engine"])
def test_core_and_engine_never_import_qt(layer):
    offences = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
                for _, path in _modules(layer)
                for line, name in _imported_names(path)
                if any(name == f or name.startswith(f + ".") for f in FORBIDDEN_IN_CORE)]
    assert not offences, "\n".join(offences)


def _tensorflow_importers(modules: list[str]) -> dict[str, str]:
    """Import each module in a fresh interpreter; map module -> error or 'tensorflow'."""
    script = f"""
import importlib, json, sys
result = {{}}
for name in {modules!r}:
    try:
        importlib.import_module(name)
    except Exception as exc:  # a module the lead has not written yet, a missing extra
        result[name] = f"import failed: {{type(exc).__name__}}: {{exc}}"
        continue
    if "tensorflow" in sys.modules or "keras" in sys.modules:
        result[name] = "tensorflow"
        break
print(json.dumps(result))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=PACKAGE.parent, env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_nothing_imports_tensorflow_at_import_time():
    modules = [name for name, _ in _modules("core") + _modules("engine") + _modules("ui")]
    modules += ["gui_app.app"]
    result = _tensorflow_importers(modules)
    heavy = [name for name, what in result.items() if what == "tensorflow"]
    assert not heavy, f"importing {heavy[0]} imports TensorFlow; import it inside the function that needs it"
    broken = {name: what for name, what in result.items() if name.startswith("gui_app.ui")}
    assert not broken, broken
