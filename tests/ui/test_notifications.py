"""Desktop notifications over a real D-Bus: a private dbus-daemon, the real gdbus client, and a
notification service in its own process that receives the call as a notification daemon would
(checked against the spec's signature ``susssasa{sv}i``)."""
from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QWidget

import pytest
from run_dirs import write_run

from gui_app.ui.notifications import DesktopNotifier, RunNotifications, gvariant_string
from gui_app.ui.settings import load_settings

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("dbus-daemon", "dbus-monitor", "gdbus", "stdbuf")),
    reason="needs dbus-daemon, dbus-monitor and gdbus (Debian: dbus-daemon, dbus-bin, libglib2.0-bin)")

SERVICE_SCRIPT = Path(__file__).with_name("notification_service.py")


class Bus:
    """A private session bus, its notification service and a dbus-monitor on it."""

    def __init__(self) -> None:
        self.daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.address = self.daemon.stdout.readline().strip()
        assert self.address, "dbus-daemon printed no address"
        self.monitor = subprocess.Popen(["stdbuf", "-oL", "dbus-monitor", "--address", self.address,
                                         "member='Notify'"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True)
        assert "NameAcquired" in self.monitor.stdout.readline()  # it listens: the bus has told it its name
        self.service = subprocess.Popen([sys.executable, str(SERVICE_SCRIPT), self.address], stdout=subprocess.PIPE,
                                        text=True, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
        assert self.service.stdout.readline().strip() == "ready"
        self.calls: list[dict] = []
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self._lines.put(line) for line in self.service.stdout], daemon=True).start()

    def received(self, n: int) -> bool:
        while not self._lines.empty():
            self.calls.append(json.loads(self._lines.get()))
        return len(self.calls) >= n

    def hints(self) -> str:
        """The calls' hints as dbus-monitor printed them (it stops listening): PySide6 cannot
        unpack a dictionary argument, dbus-monitor prints it."""
        self.monitor.terminate()
        return self.monitor.communicate(timeout=10)[0]

    def close(self) -> None:
        for process in (self.service, self.monitor, self.daemon):
            process.kill()
            process.wait(10)


@pytest.fixture
def session_bus(monkeypatch):
    bus = Bus()
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
    yield bus
    bus.close()


@pytest.fixture
def notifications(qtbot):
    window = QWidget()  # never shown: not the active window, as when the user is elsewhere
    qtbot.addWidget(window)
    return RunNotifications(window, DesktopNotifier(QIcon(), window), enabled=True)


def test_a_completed_run_is_announced_with_its_test_accuracy(qtbot, session_bus, notifications, runs_dir):
    run = write_run(runs_dir, "digits-mlp-1", "completed", accuracy=0.9582)
    assert notifications.notifier.way() == "freedesktop"
    notifications.on_run_ended("completed", str(run), "")
    qtbot.waitUntil(lambda: session_bus.received(1), timeout=10_000)
    assert session_bus.calls[0]["signature"] == "susssasa{sv}i"
    args = session_bus.calls[0]["args"]
    app_name, replaces, _icon, summary, body, actions, hints, timeout = args
    assert (summary, body) == ("Training completed", "digits-mlp-1: test accuracy 95.82 %")
    assert replaces == 0 and actions == [] and timeout == -1
    assert 'string "urgency"' in (printed := session_bus.hints()) and "byte 1" in printed, printed
    assert app_name  # the application's name, whatever the test runner set


def test_a_failed_run_is_urgent_and_says_why_quotes_and_all(qtbot, session_bus, notifications, runs_dir):
    message = "the loss became NaN or infinite at step 7; try a lower 'learning rate'\\n"
    notifications.on_run_ended("failed", str(runs_dir / "r1"), message)
    qtbot.waitUntil(lambda: session_bus.received(1), timeout=10_000)
    args = session_bus.calls[0]["args"]
    assert args[3] == "Training failed"
    assert args[4] == f"r1: {message}"  # quotes and backslashes arrive as they were
    assert 'string "urgency"' in (printed := session_bus.hints()) and "byte 2" in printed, printed


def test_nothing_is_sent_when_turned_off_or_while_the_window_is_active(qtbot, session_bus, notifications):
    notifications.enabled = False
    notifications.on_run_ended("stopped", "/runs/r1", "")
    window = notifications.parent()
    window.show()
    window.activateWindow()
    notifications.enabled = True
    qtbot.waitUntil(window.isActiveWindow, timeout=5_000)
    notifications.on_run_ended("stopped", "/runs/r2", "")
    # Something that is sent: the bus answers in order, so once it arrives the two above did not.
    window.hide()
    qtbot.waitUntil(lambda: not window.isActiveWindow(), timeout=5_000)
    notifications.on_run_ended("stopped", "/runs/r3", "")
    qtbot.waitUntil(lambda: session_bus.received(1), timeout=10_000)
    assert len(session_bus.calls) == 1 and session_bus.calls[0]["args"][4] == "r3: stopped with a checkpoint"


def test_without_a_service_nothing_is_sent_and_nothing_breaks(notifications, monkeypatch):
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    if notifications.notifier.way() == "":
        assert notifications.notifier.notify("Training completed", "r1") is False


def test_gvariant_strings_escape_what_gdbus_would_misread():
    assert gvariant_string("it's a \\ path\nnext") == "'it\\'s a \\\\ path\\nnext'"


def test_the_run_menu_turns_notifications_off_for_good(qtbot, fake_engine):
    from gui_app.ui.window.main_window import MainWindow

    window = MainWindow(engine_command=fake_engine)
    qtbot.addWidget(window)
    action = window.window_actions.notify
    assert action.isChecked() and window.notifications.enabled
    action.trigger()
    assert not window.notifications.enabled
    assert load_settings().notify_when_run_ends is False
    window.close()
    again = MainWindow(engine_command=fake_engine)
    qtbot.addWidget(again)
    assert not again.window_actions.notify.isChecked() and not again.notifications.enabled


def test_a_sweeps_end_is_announced_failures_urgent(qtbot, session_bus, notifications):
    notifications.on_sweep_ended("completed", "/sweeps/20261201-lr", "sweep completed: 6 trials (4 completed, "
                                 "2 pruned, 0 failed, 0 stopped); best trial 1: val_accuracy 0.9722 (...)")
    qtbot.waitUntil(lambda: session_bus.received(1), timeout=10_000)  # (each gdbus call is a process: one by one)
    notifications.on_sweep_ended("failed", "/sweeps/20261201-lr/", "replica-studio sweep: internal error")
    qtbot.waitUntil(lambda: session_bus.received(2), timeout=10_000)
    (_, _, _, summary, body, _, _, _), failed = session_bus.calls[0]["args"], session_bus.calls[1]["args"]
    assert (summary, body) == ("Sweep completed", "20261201-lr: sweep completed: 6 trials (4 completed, 2 pruned, "
                                                  "0 failed, 0 stopped); best trial 1: val_accuracy 0.9722 (...)")
    assert failed[3:5] == ["Sweep failed", "20261201-lr: replica-studio sweep: internal error"]
    printed = session_bus.hints()
    assert "byte 1" in printed and "byte 2" in printed, printed
