"""The real window on a 1280x720 X screen (Xvfb, no window manager): a first launch sizes itself
to the screen and nothing is cut off -- the window is exactly the screen, its status bar on it.
(With a window manager and its title bar: test_laptop_screen.py.)
Skipped without Xvfb and xdotool. packaging/screenshots.py takes the pictures the same way."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gui_app.identity import app_command, app_env

SCREEN = (1280, 720)
DISPLAY = ":47"

pytestmark = pytest.mark.skipif(not (shutil.which("Xvfb") and shutil.which("xdotool")), reason="needs Xvfb and xdotool")


@pytest.fixture
def laptop_screen():
    # -noreset: an X server resets when its last client leaves, and refuses connections meanwhile
    # (a launcher's check that connects and leaves, then Qt's connection, failed so at random).
    screen = f"{SCREEN[0]}x{SCREEN[1]}x24"
    server = subprocess.Popen(["Xvfb", DISPLAY, "-screen", "0", screen, "-nolisten", "tcp", "-noreset"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    socket = Path(f"/tmp/.X11-unix/X{DISPLAY[1:]}")
    deadline = time.monotonic() + 10
    while not socket.exists() and server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not socket.exists():
        server.kill()
        pytest.skip(f"Xvfb could not start on {DISPLAY}")
    yield DISPLAY
    server.terminate()
    server.wait(10)


def xdotool(display: str, *args: str) -> str:
    return subprocess.run(["xdotool", *args], env={**os.environ, "DISPLAY": display}, capture_output=True,
                          text=True, timeout=30).stdout


def test_a_first_launch_fills_a_laptop_screen_and_nothing_is_cut_off(laptop_screen, tmp_path):
    env = app_env({"DISPLAY": laptop_screen, "QT_QPA_PLATFORM": "xcb", "HOME": str(tmp_path),
                   "REPLICA_STUDIO_CONFIG_DIR": str(tmp_path / "config")})
    app = subprocess.Popen(app_command("--runs-dir", str(tmp_path / "runs")), env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    try:
        window = ""
        deadline = time.monotonic() + 60
        while not window and app.poll() is None and time.monotonic() < deadline:
            window = xdotool(laptop_screen, "search", "--onlyvisible", "--name", "^Replica Studio").split("\n")[0]
            time.sleep(0.1)
        assert window, f"no window appeared: {app.stderr.read() if app.poll() is not None else 'still running'}"
        # The first launch's layout settles (the devices line, the run list) and, with no window
        # manager to frame it, the window takes the whole screen (gui_app/ui/screen_fit.py).
        deadline, placed = time.monotonic() + 10, None
        while placed != ((0, 0), SCREEN) and time.monotonic() < deadline:
            geometry = xdotool(laptop_screen, "getwindowgeometry", window)
            position = tuple(int(n) for n in re.search(r"Position: (-?\d+),(-?\d+)", geometry).groups())
            size = tuple(int(n) for n in re.search(r"Geometry: (\d+)x(\d+)", geometry).groups())
            placed = (position, size)
            time.sleep(0.1)
        assert placed == ((0, 0), SCREEN), geometry  # larger would run off the screen's edge
    finally:
        app.terminate()
        try:
            app.wait(20)
        except subprocess.TimeoutExpired:
            app.kill()
