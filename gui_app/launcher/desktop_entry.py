"""``replica-studio --install-desktop-entry`` / ``--uninstall-desktop-entry``.

Puts Replica Studio into the current user's application menu the freedesktop way: a
``.desktop`` file in ``$XDG_DATA_HOME/applications`` and the icon in every size under
``$XDG_DATA_HOME/icons/hicolor`` (``$XDG_DATA_HOME`` defaults to ``~/.local/share``). No
root, no system folders, and uninstall removes exactly the files install wrote.

``Exec`` is the absolute path of the command that is running now (the ``replica-studio``
script of this environment, or the bundle's executable), so the menu entry starts this
installation whatever ``PATH`` the desktop session has. Qt-free.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from gui_app.identity import APP_ID, ICON_SIZES, resource_path
from gui_app.launcher.startup import system_env

EXIT_OK, EXIT_FAILED, EXIT_UNSUPPORTED = 0, 1, 2

# Characters that force an Exec argument into double quotes (Desktop Entry spec, "The Exec key").
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")


def data_home(env: dict[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME``, or ``~/.local/share`` when unset or not absolute (as the spec says)."""
    value = (os.environ if env is None else env).get("XDG_DATA_HOME", "")
    return Path(value) if value and os.path.isabs(value) else Path.home() / ".local" / "share"


def launch_command() -> list[str]:
    """The absolute command that starts this installation of the app."""
    if getattr(sys, "frozen", False):
        return [os.path.abspath(sys.executable)]
    # A venv's python is a symlink into the base interpreter: keep the venv's path (abspath,
    # not resolve), or the entry would start Python without the venv's packages.
    script = Path(os.path.abspath(sys.executable)).parent / APP_ID
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    command = [os.path.abspath(sys.executable), "-m", "gui_app"]
    root = Path(__file__).resolve().parents[1]
    probe = subprocess.run([*command[:1], "-c", "import gui_app"], cwd="/", capture_output=True,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    if probe.returncode != 0:  # a source checkout that is not installed: point Python at it
        command = ["env", f"PYTHONPATH={root}", *command]
    return command


def _string(value: str) -> str:
    """A value of type string: backslash, newline, tab and carriage return are escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def _exec_arg(arg: str) -> str:
    """One argument of the Exec key: quoted when needed, then escaped as a string (so a
    literal backslash in a quoted argument becomes four, as the spec says)."""
    arg = arg.replace("%", "%%")  # a literal % would start a field code
    if any(c in _RESERVED for c in arg):
        arg = '"' + re.sub(r'(["`$\\])', r"\\\1", arg) + '"'
    return _string(arg)


def render_desktop_entry(command: list[str]) -> str:
    """The ``.desktop`` file that starts ``command``."""
    # TryExec hides the entry once the program is gone (a deleted venv); skip an ``env X=Y`` prefix.
    program = next(a for a in command if a != "env" and "=" not in a)
    lines = [
        "[Desktop Entry]",
        "Type=Application",
        "Version=1.4",
        "Name=Replica Studio",
        "GenericName=Distributed Training Studio",
        "Comment=Train TensorFlow models with distribution strategies and watch every replica live",
        f"Exec={' '.join(_exec_arg(a) for a in command)}",
        f"TryExec={_string(program)}",
        f"Icon={APP_ID}",
        "Terminal=false",
        "Categories=Development;Science;",
        "Keywords=TensorFlow;Keras;machine learning;deep learning;distributed;training;GPU;",
        "StartupNotify=true",
        f"StartupWMClass={APP_ID}",
    ]
    return "\n".join(lines) + "\n"


def icon_sources() -> dict[str, Path]:
    """Paths relative to ``icons/hicolor`` mapped to the shipped files."""
    icons = resource_path("icons")
    files = {f"{s}x{s}/apps/{APP_ID}.png": icons / "hicolor" / f"{s}x{s}" / "apps" / f"{APP_ID}.png"
             for s in ICON_SIZES}
    files[f"scalable/apps/{APP_ID}.svg"] = icons / f"{APP_ID}.svg"
    return files


def installed_paths(data_dir: Path) -> list[Path]:
    """Every file :func:`install` writes under ``data_dir``."""
    return [data_dir / "applications" / f"{APP_ID}.desktop"] + [
        data_dir / "icons" / "hicolor" / rel for rel in icon_sources()]


def install(data_dir: Path | None = None, command: list[str] | None = None) -> list[Path]:
    """Write the desktop file and the icons; returns the files written."""
    data_dir = data_home() if data_dir is None else Path(data_dir)
    sources = icon_sources()
    missing = [str(p) for p in sources.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"the icon {missing[0]} is missing from this installation")
    written = []
    hicolor = data_dir / "icons" / "hicolor"
    for rel, source in sources.items():
        target = hicolor / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        written.append(target)
    entry = data_dir / "applications" / f"{APP_ID}.desktop"
    entry.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename: a menu that rescans mid-write never sees half a file.
    partial = entry.with_name(f".{entry.name}.tmp")
    partial.write_text(render_desktop_entry(command or launch_command()), encoding="utf-8")
    partial.replace(entry)
    written.insert(0, entry)
    _refresh_icon_cache(hicolor)
    return written


def uninstall(data_dir: Path | None = None) -> list[Path]:
    """Remove what :func:`install` wrote; returns the files removed (none if not installed)."""
    data_dir = data_home() if data_dir is None else Path(data_dir)
    removed = []
    for path in installed_paths(data_dir):
        if path.is_file():
            path.unlink()
            removed.append(path)
    if removed:
        _refresh_icon_cache(data_dir / "icons" / "hicolor")
    return removed


def _refresh_icon_cache(hicolor: Path) -> None:
    """GTK reads a stale icon-theme.cache instead of the folder; most user folders have none,
    and creating one would go stale on the next manual change, so only refresh an existing one."""
    tool = shutil.which("gtk-update-icon-cache")
    if tool and (hicolor / "icon-theme.cache").is_file():
        subprocess.run([tool, "--quiet", "--force", "--ignore-theme-index", str(hicolor)],
                       capture_output=True, env=system_env(), check=False)


def main(argv: list[str]) -> int:
    """``--install-desktop-entry`` or ``--uninstall-desktop-entry`` (argv[0]), no other arguments."""
    action = argv[0]
    if len(argv) > 1:
        print(f"replica-studio {action}: takes no arguments; got {' '.join(argv[1:])}", file=sys.stderr)
        return EXIT_FAILED
    if sys.platform in ("win32", "darwin"):
        print(f"replica-studio {action}: desktop entries are a Linux (freedesktop) feature; "
              "see docs/packaging.md for Windows and macOS", file=sys.stderr)
        return EXIT_UNSUPPORTED
    data_dir = data_home()
    try:
        if action == "--install-desktop-entry":
            command = launch_command()
            written = install(data_dir, command)
            print(f"Installed {written[0]}")
            print(f"  Exec: {' '.join(command)}")
            print(f"  icons: {len(written) - 1} files under {data_dir / 'icons' / 'hicolor'}")
            print("Replica Studio is now in the application menu (log out and in if it does not show yet).")
        else:
            removed = uninstall(data_dir)
            print(f"Removed {len(removed)} files from {data_dir}" if removed
                  else f"Nothing to remove: no desktop entry in {data_dir / 'applications'}")
    except OSError as exc:
        print(f"replica-studio {action}: {exc.strerror or exc}"
              f"{f' ({exc.filename})' if getattr(exc, 'filename', None) else ''}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
