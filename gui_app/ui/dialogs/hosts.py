"""HostsDialog (Tools -> Hosts…): the SSH hosts of hosts.json, which the command line's
``replica-studio hosts`` shares (docs/hosts.md).

The list on the left; the selected host's entry on the right: the ssh destination, the port, the
command that starts the app there and the runs folder there, checked as the file checks them
(gui_app.core.ssh_hosts.Host's own one-line errors, shown under the fields). Save adds a host or
changes the one of that name, Remove forgets it. Test connection runs ``hosts test HOST --json``
as an engine process (off the GUI thread: connecting can take seconds): the app's version there
and the devices it sees, or ssh's failure told in one line (gui_app.core.ssh.explain_failure:
what to do, e.g. ``ssh-copy-id``). Reconnect runs ``hosts reconnect HOST --json``: the host's
shared connections are ended first (a server whose configuration changed is seen anew; its host
key is checked again), then the same test.
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gui_app.core.answers import DevicesInfo, decode
from gui_app.core.ssh_hosts import DEFAULT_COMMAND, Host, HostsFileError, add_host, load_hosts, remove_host
from gui_app.ui.colors import ERROR_STYLE
from gui_app.ui.screen_fit import ScreenFit, grow_to_fit
from gui_app.ui.workers.engine_job import QUERY_TIMEOUT_S, EngineJob

TEST_PREFIXES = ("replica-studio hosts test: ", "replica-studio hosts reconnect: ")  # the command names itself


def describe_test(answer: dict) -> str:
    """One line from ``hosts test --json``: the release there and the devices it sees."""
    devices = decode(DevicesInfo, answer.get("devices")) or DevicesInfo()
    gpus = devices.gpus
    seen = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}" if gpus else "no GPU"
    return (f"Connected: replica-studio {answer.get('version', '?')} there, TensorFlow "
            f"{devices.tensorflow}; {seen}; CPU {devices.cpu.describe()}").rstrip()


class HostsDialog(QDialog):
    changed = Signal()  # hosts.json was written (the Run on list reads it again)

    def __init__(self, engine_command: Callable[..., list[str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Hosts")
        ScreenFit(self)
        self._engine_command = engine_command
        self._job: EngineJob | None = None
        self.list = QListWidget()
        self.list.currentTextChanged.connect(self._show)
        self.name = QLineEdit(placeholderText="user@host or a ~/.ssh/config alias")
        self.port = QSpinBox(minimum=0, maximum=65535)
        self.port.setSpecialValueText("ssh's own")
        self.command = QLineEdit(placeholderText=DEFAULT_COMMAND)
        self.command.setToolTip("Shell words that start the app there, e.g. ~/venv/bin/replica-studio "
                                "or conda run -n tf replica-studio")
        self.runs_dir = QLineEdit(placeholderText="the app's default folder there")
        form = QFormLayout()
        form.addRow("Host", self.name)
        form.addRow("Port", self.port)
        form.addRow("Command there", self.command)
        form.addRow("Runs folder there", self.runs_dir)
        self.error = QLabel(wordWrap=True)
        self.error.setStyleSheet(ERROR_STYLE)
        # Not self.result: that would hide QDialog.result().
        self.result_label = QLabel(wordWrap=True, textInteractionFlags=Qt.TextInteractionFlag.TextSelectableByMouse)
        self.new_button, self.save_button = QPushButton("New"), QPushButton("Save")
        self.remove_button, self.test_button = QPushButton("Remove"), QPushButton("Test connection")
        self.reconnect_button = QPushButton("Reconnect")
        self.reconnect_button.setToolTip("End the shared connection to this host and connect anew (after the "
                                         "server's configuration or its host key changed)")
        self.new_button.clicked.connect(self._new_entry)
        self.save_button.clicked.connect(self.save)
        self.remove_button.clicked.connect(self.remove)
        self.test_button.clicked.connect(self.test)
        self.reconnect_button.clicked.connect(lambda: self.test(reconnect=True))
        row = QHBoxLayout()
        for button in (self.new_button, self.save_button, self.remove_button, self.test_button, self.reconnect_button):
            row.addWidget(button)
        entry = QVBoxLayout()
        entry.addLayout(form)
        entry.addWidget(self.error)
        entry.addLayout(row)
        entry.addWidget(self.result_label)
        entry.addStretch(1)
        hint = QLabel("Key login without a prompt is needed: set it up once with ssh-copy-id HOST, and accept the "
                      "host key once with ssh HOST.", wordWrap=True)
        columns = QHBoxLayout()
        columns.addWidget(self.list, 1)
        columns.addLayout(entry, 2)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(columns)
        layout.addWidget(hint)
        layout.addWidget(buttons)
        self.fill()
        self.resize(max(640, self.sizeHint().width()), self.sizeHint().height())  # room for the list beside the fields

    # ---- the list ------------------------------------------------------------------------------
    def fill(self, current: str = "") -> None:
        try:
            hosts, problem = load_hosts(), ""
        except HostsFileError as exc:
            hosts, problem = {}, str(exc)
        self.list.blockSignals(True)
        self.list.clear()
        self.list.addItems(list(hosts))
        self.list.blockSignals(False)
        found = self.list.findItems(current, Qt.MatchFlag.MatchExactly) if current else []
        if found:
            self.list.setCurrentItem(found[0])
        elif self.list.count():
            self.list.setCurrentRow(0)
        else:
            self._show("")
        if problem:  # never overwritten: the user's hosts are not lost (gui_app.core.ssh_hosts)
            self._say(problem)
            self.save_button.setEnabled(False)

    def _new_entry(self) -> None:
        self.list.setCurrentRow(-1)
        self._show("")

    def _show(self, name: str) -> None:
        """Fill the fields from the stored entry ``name`` ("" or none: empty, for a new host)."""
        try:
            host = load_hosts().get(name) if name else None
        except HostsFileError:
            host = None
        self.name.setText(host.name if host else "")
        self.port.setValue((host.port or 0) if host else 0)
        self.command.setText(host.command if host and host.command != DEFAULT_COMMAND else "")
        self.runs_dir.setText((host.runs_dir or "") if host else "")
        self._say("")
        self.result_label.setText("")
        self.remove_button.setEnabled(host is not None)
        self.test_button.setEnabled(host is not None)
        self.reconnect_button.setEnabled(host is not None)

    def entry(self) -> Host:
        """The host the fields describe; ValueError (the file's own message) when they cannot be one."""
        return Host(self.name.text().strip(), self.port.value() or None,
                    self.command.text().strip() or DEFAULT_COMMAND, self.runs_dir.text().strip() or None)

    # ---- add, change, remove, test ---------------------------------------------------------------
    def save(self) -> bool:
        try:
            host = self.entry()
            add_host(host)
        except (ValueError, HostsFileError) as exc:  # HostsFileError is a ValueError: named for the reader
            self._say(str(exc))
            return False
        self.fill(host.name)
        self.changed.emit()
        return True

    def remove(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        try:
            remove_host(item.text())
        except HostsFileError as exc:
            self._say(str(exc))
            return
        self.fill()
        self.changed.emit()

    def test(self, reconnect: bool = False) -> None:
        """Test the selected host as stored (the fields are saved first when they changed);
        ``reconnect``: on a new connection."""
        item = self.list.currentItem()
        if item is None or (not self._saved() and not self.save()):
            return
        name = self.list.currentItem().text()
        self.result_label.setStyleSheet("")
        self.result_label.setText(f"{'Reconnecting' if reconnect else 'Connecting'} to {name}…")
        self._set_testing(True)
        self._job = (EngineJob(self._engine_command("hosts", "reconnect" if reconnect else "test", name, "--json"),
                               name="the connection test", timeout_s=QUERY_TIMEOUT_S, parent=self)
                     .on_result(self._on_tested).on_failure(self._on_test_failed)
                     .on_finished(lambda: self._set_testing(False))
                     .start(replacing=self._job))

    def _set_testing(self, testing: bool) -> None:
        for button in (self.test_button, self.reconnect_button):
            button.setEnabled(not testing and self.list.currentItem() is not None)

    def is_testing(self) -> bool:
        return self._job is not None and self._job.is_running()

    def _saved(self) -> bool:
        try:
            return load_hosts().get(self.list.currentItem().text()) == self.entry()
        except (ValueError, HostsFileError):
            return False

    def _on_tested(self, answer: dict) -> None:
        self.result_label.setStyleSheet("")
        self.result_label.setText(describe_test(answer))
        grow_to_fit(self)

    def _on_test_failed(self, message: str) -> None:
        self.result_label.setStyleSheet(ERROR_STYLE)
        for prefix in TEST_PREFIXES:
            message = message.removeprefix(prefix)
        self.result_label.setText(message)
        grow_to_fit(self)

    def _say(self, message: str) -> None:
        self.error.setText(message)
        self.error.setVisible(bool(message))
        grow_to_fit(self)  # the fields keep their height above a message of several lines

    def done(self, code: int) -> None:
        if self._job is not None:  # closing: no answer is waited for
            self._job.discard()
            self._job = None
        super().done(code)
