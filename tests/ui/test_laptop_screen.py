"""Every window on a 1280x720 laptop screen WITH a window manager (Xvfb and openbox): the title
bar the window manager adds counts. The main window (each tab, a run open, a long status line; a
multi-worker config on the forms), every dialog the menus open, the sweep window and the Compare
window each open in a process of their own (tests/ui/laptop_driver.py, real X, QT_QPA_PLATFORM=xcb)
and must lie, frame included, inside the screen's available geometry, with every button inside
its window, no field squeezed, and every cut label, combo box or table cell telling its whole
text in a tooltip. Skipped without Xvfb or openbox (.ci/run installs them)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gui_app.identity import app_env

SCREEN = (1280, 720)
DRIVER = Path(__file__).with_name("laptop_driver.py")
WINDOWS = {"main-dataset", "main-training", "main-replicas", "main-evaluation", "main-try", "main-log",
           "tool-prepare", "tool-scaling", "tool-rehearse", "export", "resume", "getting-started", "new-sweep", "hosts",
           "main-multi-worker", "submit-slurm", "submit-kubernetes", "about", "sweep", "compare"}

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (shutil.which("Xvfb") and shutil.which("openbox")),
                                                   reason="needs Xvfb and openbox")]


def free_display() -> str:
    """A display number no X server uses here (its socket and lock file are absent)."""
    for number in range(60, 200):
        if not Path(f"/tmp/.X11-unix/X{number}").exists() and not Path(f"/tmp/.X{number}-lock").exists():
            return f":{number}"
    pytest.skip("no free X display number")


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.skip(f"{what} did not come up within {timeout_s:.0f} s")
        time.sleep(0.05)


def openbox_manages(display: str) -> bool:
    """openbox has taken the screen: it names itself on the root window (_NET_SUPPORTING_WM_CHECK)."""
    if shutil.which("xprop") is None:
        return True  # (x11-utils missing: the driver still waits for a framed window)
    answer = subprocess.run(["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"], env={**os.environ, "DISPLAY": display},
                            capture_output=True, text=True, timeout=10).stdout
    return "window id" in answer


@pytest.fixture
def laptop_with_window_manager():
    display = free_display()
    # -noreset: an X server resets when its last client leaves, and refuses connections meanwhile.
    server = subprocess.Popen(["Xvfb", display, "-screen", "0", f"{SCREEN[0]}x{SCREEN[1]}x24", "-nolisten", "tcp",
                               "-noreset"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    manager = None
    try:
        wait_for(lambda: Path(f"/tmp/.X11-unix/X{display[1:]}").exists() or server.poll() is not None, 10, "Xvfb")
        if server.poll() is not None:
            pytest.skip(f"Xvfb could not start on {display}")
        manager = subprocess.Popen(["openbox"], env={**os.environ, "DISPLAY": display}, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        wait_for(lambda: openbox_manages(display), 15, "openbox")
        yield display
    finally:
        for process in (manager, server):
            if process is not None:
                process.terminate()
                process.wait(10)


def test_every_window_fits_a_laptop_screen_with_its_title_bar(laptop_with_window_manager, tmp_path):
    report = tmp_path / "report.json"
    env = app_env({"DISPLAY": laptop_with_window_manager, "QT_QPA_PLATFORM": "xcb", "HOME": str(tmp_path),
                   "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PYQTGRAPH_QT_LIB": "PySide6"})
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)  # no desktop notifications on a developer's session bus
    shots = os.environ.get("LAPTOP_SHOTS")  # set it to a folder to look at the screens
    done = subprocess.run([sys.executable, str(DRIVER), str(tmp_path / "work"), str(report),
                           *(["--shots", shots] if shots else [])], env=env, capture_output=True, text=True,
                          timeout=600)
    assert report.exists(), done.stderr[-3000:]
    windows = json.loads(report.read_text())
    assert done.returncode == 0, done.stderr[-3000:]
    assert {w["name"] for w in windows} == WINDOWS
    for window in windows:
        x, y, width, height = window["frame"]
        rx, ry, room_width, room_height = window["room"]
        assert (room_width, room_height) == SCREEN  # openbox has no panel: the whole screen
        inside = rx <= x and ry <= y and x + width <= rx + room_width and y + height <= ry + room_height
        assert inside, (window["name"], window["frame"], "runs off the screen")
        assert height > 100 and width > 300, window  # a real frame (title bar and all), not a sliver
        assert window["problems"] == [], window["name"]
    main = next(w for w in windows if w["name"] == "main-training")
    assert main["frame"][2:] == list(SCREEN)  # a first launch takes the whole room, frame included
