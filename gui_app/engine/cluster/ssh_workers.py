"""The workers of a ``strategy.cluster`` that ``train`` starts itself over ssh.

An entry ``{"host": "gpu2", "port": 2222}`` names an SSH host (docs/hosts.md) and the gRPC port
of its worker there. Before the first start: each host's address is the host name ``ssh`` would
connect to (``ssh -G``: an alias of ``~/.ssh/config`` becomes its ``HostName``), the app there is
checked (``check_app``: its release; a host that refuses is one line, exit 2), and the config
every worker reads has the plain ``host:port`` list -- so each worker, here or there, takes its
``TF_CONFIG`` from that list and its ``--index`` (engine/cluster/topology.py), as a worker
started by hand does. The chief (index 0) stays here and writes the run directory.

A worker there is ``ssh HOST 'HOST_COMMAND worker "$config" --index I ...'`` (gui_app/core/ssh.py:
the config on stdin, every argument quoted, the shared connection), watched like a local worker:
its stderr is relayed, its exit is ssh's exit. stdin stays open and its end kills the worker
there, so a worker never outlives its connection: killing the ssh client (the launcher ends the
cluster, or dies) ends it, and a dropped connection (ssh exit 255) is a failed worker.
"""
from __future__ import annotations

import contextlib
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from gui_app.core import rundir
from gui_app.core.cluster_addresses import SshWorker
from gui_app.core.config import RunConfig
from gui_app.core.ssh import (
    STDIN_FILE,
    HostError,
    StdinFile,
    check_app,
    config_line,
    config_words,
    shell_command,
    ssh_argv,
)
from gui_app.core.ssh_files import remote_folders, send
from gui_app.core.ssh_hosts import Host, HostsFileError, find_host
from gui_app.engine.cluster.processes import WorkerProcess, start_process
from gui_app.engine.run.failures import InputError


@dataclass
class SshCluster:
    """The hosts of the ssh entries by index, and the config with every entry an address."""

    hosts: dict[int, Host]
    addresses: tuple[str, ...]
    config_file: Path  # the resolved config (a temporary file): what every worker reads
    config_line: bytes = field(repr=False)  # the same, as the first line of a remote worker's stdin

    def start(self, index: int, data_seed: int, resume: bool, restore_from: str | None,
              status_to: str | None = None) -> WorkerProcess:
        """Start worker ``index`` on its host; ``restore_from``: the chief's checkpoints there;
        ``status_to``: where it sends its status reports (engine/cluster/status_reports.py)."""
        host = self.hosts[index]
        args: list[str | StdinFile] = ["worker", STDIN_FILE, "--index", str(index), "--data-seed", str(data_seed),
                                       "--events", "none"]
        if resume:
            args.append("--resume")
        if restore_from:
            args += ["--restore-from", restore_from]
        if status_to:
            args += ["--status-to", status_to]
        argv = ssh_argv(host, shell_command(host, args, ends_with_input=True))
        worker = start_process(index, self.addresses[index], argv, stdin=subprocess.PIPE, host=host.name)
        assert worker.proc.stdin is not None  # a pipe: the config, then open until the worker ends
        try:
            worker.proc.stdin.write(self.config_line.decode("utf-8"))
            worker.proc.stdin.flush()
        except OSError:
            pass  # ssh ended already: the watch loop names it
        return worker

    @contextlib.contextmanager
    def checkpoints_there(self, run_dir: Path) -> Iterator[dict[int, str]]:
        """A copy of the chief's checkpoints on each host (a restarted cluster restores from
        them on every worker), by index; removed afterwards. Empty before the first checkpoint."""
        local = run_dir / rundir.CHECKPOINT_DIR
        with contextlib.ExitStack() as stack:
            copies: dict[int, str] = {}
            try:
                for index, host in self.hosts.items() if local.is_dir() else ():
                    folder = stack.enter_context(remote_folders(host, 1))[0]
                    send(host, local, folder)
                    copies[index] = f"{folder}/{rundir.CHECKPOINT_DIR}"
            except HostError as exc:
                raise InputError(str(exc)) from None
            yield copies


def resolve(config: RunConfig, work_dir: Path) -> SshCluster | None:
    """The ssh workers of ``config`` checked and their addresses found (None: it names no SSH
    host); InputError (one line) when a host cannot run a worker."""
    entries = config.strategy.cluster
    if not isinstance(entries, tuple) or not any(isinstance(e, SshWorker) for e in entries):
        return None
    hosts: dict[int, Host] = {}
    addresses: list[str] = []
    checked: set[str] = set()
    try:
        for index, entry in enumerate(entries):
            if not isinstance(entry, SshWorker):
                addresses.append(entry)
                continue
            host = hosts[index] = find_host(entry.host)
            if host.name not in checked:
                check_app(host)  # opens the shared connection the worker will use
                checked.add(host.name)
            addresses.append(f"{_bracketed(_host_name(host))}:{entry.port}")
    except (HostError, HostsFileError) as exc:
        raise InputError(str(exc)) from None
    resolved = config.replace(strategy={"cluster": tuple(addresses)})  # ConfigError: a public address
    config_file = work_dir / rundir.CONFIG_FILE
    resolved.save(config_file)
    return SshCluster(hosts, tuple(addresses), config_file, config_line(config_file))


def _host_name(host: Host) -> str:
    """The address ``ssh`` connects to for ``host`` (its ``HostName``), from ``ssh -G``."""
    done = subprocess.run(["ssh", "-G", *config_words(host), "--", host.name], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, errors="replace", timeout=30)
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key == "hostname" and value:
            return value.strip()
    raise HostError(f"{host.name}: ssh -G names no host name ({done.stderr.strip()[-200:] or 'no output'})")


def _bracketed(name: str) -> str:
    return f"[{name}]" if ":" in name else name


@contextlib.contextmanager
def ssh_cluster(config: RunConfig) -> Iterator[SshCluster | None]:
    """:func:`resolve` with its temporary folder, removed at the end."""
    with tempfile.TemporaryDirectory(prefix="replica-studio-cluster-") as work_dir:
        yield resolve(config, Path(work_dir))
