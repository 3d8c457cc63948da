"""ClusterPanel: where the workers of a multi-worker run are (part of the StrategyForm).

This machine (worker processes on 127.0.0.1, started by the run), your own machines (a list of
``host:port``; this machine is index 0, the chief, and each other host runs the command shown
beside it; or ``ssh HOST:PORT`` lines, SSH hosts whose workers the run starts itself), or what
a scheduler provides (TF_CONFIG, a Slurm allocation). TensorFlow's gRPC servers have no
authentication, which the panel says where it matters.
"""
from __future__ import annotations

from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QFormLayout,
    QGridLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from gui_app.core.cluster_addresses import SshWorker, is_loopback, split_host
from gui_app.core.config import ConfigError
from gui_app.core.wording import label
from gui_app.ui.colors import WARNING_STYLE
from gui_app.ui.config.cluster_check import ClusterCheck
from gui_app.ui.config.form_base import choice_box, format_float

PLACES = {
    "local": "This machine (worker processes on 127.0.0.1)",
    "hosts": "My machines (host:port list)",
    "tf_config": "TF_CONFIG (Kubeflow, an existing cluster)",
    "slurm": "Slurm allocation (srun)",
}
COMMUNICATION_LABELS = {"auto": "Automatic", "ring": "Ring (gRPC)", "nccl": "NCCL (GPUs)"}
NO_AUTH = ("TensorFlow's gRPC servers have no authentication: anyone who can reach these ports can run "
           "code in the workers. Use a network you trust; public addresses are refused unless allowed.")
LOCAL_NOTE = ("Local workers talk over 127.0.0.1, but TensorFlow's gRPC servers listen on every interface "
              "and have no authentication: on a shared network, keep their ports behind a firewall.")
CONFIG_NAME = "run.json"  # what the command calls the config file (File → Save the same config there)


class ClusterPanel(QWidget):
    """The multi-worker keys of ``strategy``; :meth:`values` gives them as a dict."""

    def __init__(self, on_changed, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.form = QFormLayout(self)
        self.form.setContentsMargins(0, 0, 0, 0)
        self.place = choice_box(PLACES)
        self.form.addRow(label("strategy.cluster"), self.place)
        self.workers = QSpinBox()
        self.workers.setRange(1, 64)
        self.workers.setValue(2)
        self.form.addRow(label("strategy.workers"), self.workers)
        self.ps = QSpinBox()
        self.ps.setRange(1, 16)
        self.form.addRow(label("strategy.ps"), self.ps)
        self.hosts = QPlainTextEdit()
        self.hosts.setPlaceholderText("one host:port per line; the first is this machine (the chief)\n"
                                      "192.168.1.10:2222\n192.168.1.11:2222   (or: ssh gpu2:2222, an SSH "
                                      "host the run starts its worker on)")
        self.hosts.setMaximumHeight(90)
        self.form.addRow("Hosts", self.hosts)
        self.commands = QWidget()
        self.commands_grid = QGridLayout(self.commands)
        self.commands_grid.setContentsMargins(0, 0, 0, 0)
        self.form.addRow("Start on the others", self.commands)
        self.communication = choice_box(COMMUNICATION_LABELS)
        self.form.addRow(label("strategy.communication"), self.communication)
        self.timeout = QLineEdit()
        self.timeout.setPlaceholderText("none")
        self.timeout.setToolTip("Collective timeout in seconds; leave room for the first step's tracing (≥ 60)")
        self.form.addRow(label("strategy.timeout_s"), self.timeout)
        self.join_timeout = QSpinBox()
        self.join_timeout.setRange(1, 3600)
        self.join_timeout.setValue(120)
        self.form.addRow(label("strategy.join_timeout_s"), self.join_timeout)
        self.max_restarts = QSpinBox()
        self.max_restarts.setRange(0, 100)
        self.max_restarts.setToolTip("Restart the whole cluster from its last checkpoint after a failure")
        self.form.addRow(label("strategy.max_restarts"), self.max_restarts)
        self.allow_public = QCheckBox(label("strategy.allow_public_hosts"))
        self.form.addRow(self.allow_public)
        self.warning = QLabel(NO_AUTH)
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet(WARNING_STYLE)
        self.form.addRow(self.warning)
        self.check = ClusterCheck()  # preflight as an engine job; the config panel configures it
        self.form.addRow(self.check)
        self.copy_buttons: list[QPushButton] = []
        self._strategy = "multi_worker_mirrored"
        for widget in (self.place, self.communication):
            widget.currentIndexChanged.connect(on_changed)
        for spin in (self.workers, self.ps, self.join_timeout, self.max_restarts):
            spin.valueChanged.connect(on_changed)
        self.hosts.textChanged.connect(on_changed)
        self.timeout.textChanged.connect(on_changed)
        self.allow_public.toggled.connect(on_changed)

    # ---- values ----------------------------------------------------------------------
    def host_list(self) -> list[str]:
        return [line.strip() for line in self.hosts.toPlainText().splitlines() if line.strip()]

    def cluster_entries(self) -> tuple[str | SshWorker, ...]:
        """The host lines as ``strategy.cluster`` entries: ``ssh HOST:PORT`` is an SSH host (one
        without a port fails the config's check, which names the missing port)."""
        entries: list[str | SshWorker] = []
        for line in self.host_list():
            if line.startswith("ssh "):
                host, _, port = line[4:].strip().rpartition(":")
                entries.append(SshWorker(host, int(port)) if port.isdigit() else SshWorker(line[4:].strip()))
            else:
                entries.append(line)
        return tuple(entries)

    def values(self, strategy: str) -> dict:
        place = self.place.currentData()
        timeout = self.timeout.text().strip()
        if timeout and not _is_number(timeout):
            raise ConfigError(f"strategy.timeout_s: must be a number of seconds or empty; got {timeout!r}")
        out = {"communication": self.communication.currentData() if strategy == "multi_worker_mirrored" else "auto",
               "timeout_s": float(timeout) if _is_number(timeout) else None,
               "join_timeout_s": float(self.join_timeout.value()), "max_restarts": self.max_restarts.value(),
               "allow_public_hosts": self.allow_public.isChecked(), "workers": 0, "ps": 0, "cluster": None}
        if place == "local":
            out["workers"] = self.workers.value()
            out["ps"] = self.ps.value() if strategy == "parameter_server" else 0
        elif place == "hosts":
            out["cluster"] = self.cluster_entries()
        else:
            out["cluster"] = place
        return out

    def set_values(self, section) -> None:
        cluster = section.cluster
        place = "local" if cluster is None else ("hosts" if isinstance(cluster, tuple) else cluster)
        self.place.setCurrentIndex(self.place.findData(place))
        if section.workers:
            self.workers.setValue(section.workers)
        if section.ps:
            self.ps.setValue(section.ps)
        self.hosts.setPlainText("\n".join(_line(entry) for entry in cluster) if isinstance(cluster, tuple) else "")
        self.communication.setCurrentIndex(self.communication.findData(section.communication))
        self.timeout.setText("" if section.timeout_s is None else format_float(section.timeout_s))
        self.join_timeout.setValue(int(section.join_timeout_s))
        self.max_restarts.setValue(section.max_restarts)
        self.allow_public.setChecked(section.allow_public_hosts)

    # ---- display ---------------------------------------------------------------------
    def refresh(self, strategy: str) -> None:
        self._strategy = strategy
        place = self.place.currentData()
        over_ssh = place == "hosts" and any(h.startswith("ssh ") for h in self.host_list())  # the run starts them all
        rows = {self.workers: place == "local", self.ps: place == "local" and strategy == "parameter_server",
                self.hosts: place == "hosts", self.commands: place == "hosts",
                self.communication: strategy == "multi_worker_mirrored",
                self.max_restarts: place == "local" or over_ssh,
                self.allow_public: place == "hosts"}
        for widget, shown in rows.items():
            self.form.setRowVisible(widget, shown)
        self._fill_commands()
        hosts_public = place == "hosts" and any(not _loopback(h) for h in self.host_list())
        self.warning.setText(NO_AUTH if place != "local" and (hosts_public or place != "hosts")
                             else LOCAL_NOTE)

    def worker_command(self, index: int) -> str:
        extra = " --allow-public-hosts" if self.allow_public.isChecked() else ""
        return f"replica-studio worker {CONFIG_NAME} --index {index}{extra}"

    def _fill_commands(self) -> None:
        while self.commands_grid.count():
            item = self.commands_grid.takeAt(0)  # not None: count() said there is one
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.copy_buttons = []
        hosts = self.host_list()
        if len(hosts) < 2:
            self.commands_grid.addWidget(QLabel("List this machine first, then the other hosts."), 0, 0)
            return
        for i, host in enumerate(hosts[1:], start=1):
            if host.startswith("ssh "):
                self.commands_grid.addWidget(QLabel(host[4:]), i, 0)
                self.commands_grid.addWidget(QLabel("started over ssh by the run"), i, 1)
                continue
            command = QLineEdit(self.worker_command(i))
            command.setReadOnly(True)
            button = QPushButton("Copy")
            button.setToolTip(f"Copy the command to run on {host} (with the same run configuration saved as "
                              f"{CONFIG_NAME})")
            text = command.text()
            button.clicked.connect(lambda _=False, text=text: QApplication.clipboard().setText(text))
            self.copy_buttons.append(button)
            self.commands_grid.addWidget(QLabel(host), i, 0)
            self.commands_grid.addWidget(command, i, 1)
            self.commands_grid.addWidget(button, i, 2)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _line(entry: str | SshWorker) -> str:
    return f"ssh {entry.host}:{entry.port}" if isinstance(entry, SshWorker) else entry


def _loopback(address: str) -> bool:
    try:
        return is_loopback(split_host(address)[0])
    except ValueError:
        return False

