"""RunPlace: where the window's engine jobs run -- this computer, or an SSH host of hosts.json
(docs/hosts.md) -- and the "Run on" list that chooses it.

With a host chosen, device detection, the dataset and model check and Train run there: their
engine commands get ``--host HOST`` (:meth:`RunPlace.command`), the run directory is the host's
and the run is followed over ssh (gui_app.ui.workers.attachment). The choice is kept in the
settings (``run_on``); a host no longer in hosts.json falls back to this computer. The other
tools (export, the Try tab, the scaling benchmark) stay on this computer.

The choice itself is a field of the window's state (``WindowState.run_on``, its signal
``run_on_changed``): RunPlace only turns a name of hosts.json into that field and builds the
commands that go there, so nothing else keeps a copy of it.
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, SignalInstance
from PySide6.QtWidgets import QComboBox, QWidget

from gui_app.core.ssh import is_host_failure
from gui_app.core.ssh_hosts import Host, HostsFileError, load_hosts
from gui_app.ui.window.window_state import WindowState

THIS_COMPUTER = "This computer"


def stored_hosts() -> tuple[dict[str, Host], str]:
    """The hosts of hosts.json, and "" or the line saying why it cannot be read."""
    try:
        return load_hosts(), ""
    except HostsFileError as exc:
        return {}, str(exc)


class RunPlace(QObject):
    def __init__(self, engine_command: Callable[..., list[str]], state: WindowState, host_name: str | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._engine_command = engine_command
        self._state = state
        if host_name:
            self.set_host(host_name)

    @property
    def changed(self) -> SignalInstance:
        """Another host, or this computer: the state's own signal."""
        return self._state.run_on_changed

    @property
    def host(self) -> Host | None:
        return self._state.run_on

    @property
    def name(self) -> str | None:
        host = self._state.run_on
        return host.name if host is not None else None

    def command(self, *args: str) -> list[str]:
        """The engine command ``args`` where the jobs run (``--host`` takes every query the forms ask)."""
        host = self._state.run_on
        return self._engine_command(*args, *(["--host", host.name] if host is not None else []))

    def failed_host(self, line: str) -> str | None:
        """The host's name when ``line`` is the host's own failure (ssh cannot reach it, the app
        there does not answer): detection, the dataset check and the run list then all fail with
        it, and it is told once, on the Devices section. None for any other line, or here."""
        host = self._state.run_on
        return host.name if host is not None and is_host_failure(host.name, line) else None

    def set_host(self, name: str | None) -> None:
        """Run on the host of hosts.json called ``name`` (its entry as stored now), or here (None)."""
        self._state.set_run_on(stored_hosts()[0].get(name) if name else None)


class RunOnBox(QComboBox):
    """The "Run on" list: this computer, then each host of hosts.json, read again whenever it opens."""

    def __init__(self, place: RunPlace, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._place = place
        self.setToolTip("Where Train, device detection and the dataset check run: this computer, or an SSH host "
                        "(Tools → Hosts… adds one)")
        self.refill()
        self.activated.connect(lambda index: place.set_host(self.itemData(index)))
        place.changed.connect(lambda _host: self.refill())

    def refill(self) -> None:
        hosts, problem = stored_hosts()
        if self._place.name is not None and self._place.name not in hosts:
            self._place.set_host(None)  # removed from the list: back here (refills again)
            return
        self.blockSignals(True)
        self.clear()
        self.addItem(THIS_COMPUTER, None)
        for name in hosts:
            self.addItem(name, name)
        self.setCurrentIndex(max(0, self.findData(self._place.name)) if self._place.name else 0)
        self.blockSignals(False)
        if problem:
            self.setToolTip(problem)

    def showPopup(self) -> None:  # noqa: N802 (Qt override)
        self.refill()  # hosts.json may have changed (the Hosts dialog, the command line)
        super().showPopup()
