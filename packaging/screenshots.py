"""Make docs/screenshots/*.png: the window as a 1280x720 laptop shows it, under Xvfb, on a short
real run (each tab, and the export dialog after a full-integer int8 export).

    python packaging/screenshots.py [--out docs/screenshots] [--display :45] [--epochs 3]

It starts ``Xvfb DISPLAY -screen 0 1280x720x24`` (no window manager: the window is the screen),
trains a digits run with the engine's command line into a temporary runs folder (about 30 s),
then opens the window on that folder in this process, with settings in a temporary folder, as a
first launch would: it sizes itself to the screen. Each picture is the whole X screen. Needs
Xvfb; nothing else is installed or touched.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCREEN = (1280, 720)
TABS = ("dataset", "training", "replicas", "evaluation", "try", "log")  # in the window's order


def start_xvfb(display: str) -> subprocess.Popen:
    # -noreset: an X server resets when its last client leaves, and refuses connections meanwhile
    # (a launcher's check that connects and leaves, then Qt's connection, failed so at random).
    screen = f"{SCREEN[0]}x{SCREEN[1]}x24"
    server = subprocess.Popen(["Xvfb", display, "-screen", "0", screen, "-nolisten", "tcp", "-noreset"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    socket = Path(f"/tmp/.X11-unix/X{display.lstrip(':')}")
    deadline = time.monotonic() + 10
    while not socket.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"Xvfb {display} did not start")
        time.sleep(0.05)
    return server


def train_a_run(runs_dir: Path, epochs: int) -> Path:
    from gui_app.identity import app_command, app_env
    from gui_app.ui.config.config_panel import first_launch_config

    config = first_launch_config().to_dict()
    config["training"]["epochs"] = epochs
    path = runs_dir.parent / "config.json"
    path.write_text(json.dumps(config))
    subprocess.run(app_command("train", str(path), "--runs-dir", str(runs_dir), "--events", "none"),
                   env=app_env(), check=True, cwd=ROOT)
    (run,) = [p for p in runs_dir.iterdir() if p.is_dir()]
    return run


def wait_until(predicate, timeout_s: float = 60.0) -> None:
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {predicate.__doc__ or predicate}")
        QApplication.processEvents()
        time.sleep(0.02)


def settle(seconds: float = 0.6) -> None:
    """Let the charts' redraw timers and the paints run."""
    wait_until(_after(seconds), seconds + 5)


def _after(seconds: float):
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end


def shoot(path: Path) -> None:
    from PySide6.QtGui import QGuiApplication

    settle()
    image = QGuiApplication.primaryScreen().grabWindow(0)
    if not image.save(str(path)):
        raise SystemExit(f"could not write {path}")
    print(f"{path}  {image.width()}x{image.height()}")


def take(runs_dir: Path, run: Path, out: Path) -> None:
    from PySide6.QtWidgets import QApplication

    from gui_app.ui import application
    from gui_app.ui.window.main_window import MainWindow

    app = QApplication([sys.argv[0]])
    application.polish_application(app)
    window = MainWindow(runs_dir=runs_dir)
    window.show()
    window.start()
    wait_until(lambda: not window.runs.is_filling())
    panel = window.config_panel
    wait_until(lambda: not panel.inspector.is_busy(), 120)  # the Dataset tab shows the forms' dataset
    assert window.files.open_run(str(run))
    for index, name in enumerate(TABS[:-1]):  # the log once the export has written to it
        window.tabs.setCurrentIndex(index)
        if name == "try":
            wait_until(lambda: window.try_tab.model_source() is not None and not window.try_tab.is_loading(), 120)
            window.try_tab.add_test_samples()
            wait_until(lambda: not window.try_tab.is_loading(), 120)
        shoot(out / f"{name}.png")
    dialog = window.models.export_model("tflite-int8-full", str(run))
    finished: list[object] = []
    dialog.succeeded.connect(finished.append)
    dialog.failed.connect(finished.append)
    dialog.start()
    wait_until(lambda: bool(finished), 300)
    shoot(out / "export.png")
    dialog.close()
    window.tabs.setCurrentIndex(TABS.index("log"))
    shoot(out / "log.png")
    window.settings.confirm_close_during_run = False
    window.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--display", default=":45", help="the Xvfb display to start (default :45)")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args(argv)
    server = start_xvfb(args.display)
    try:
        with tempfile.TemporaryDirectory(prefix="replica-studio-shots-") as tmp:
            os.environ.update({"DISPLAY": args.display, "QT_QPA_PLATFORM": "xcb", "HOME": tmp,
                               "REPLICA_STUDIO_CONFIG_DIR": str(Path(tmp) / "config")})
            runs_dir = Path(tmp) / "runs"
            runs_dir.mkdir()
            run = train_a_run(runs_dir, args.epochs)
            args.out.mkdir(parents=True, exist_ok=True)
            take(runs_dir, run, args.out)
    finally:
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
