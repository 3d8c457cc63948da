"""Cluster addresses and ``TF_CONFIG`` (TensorFlow-free: the config and the window use it).

A ``strategy.cluster`` list holds ``"host:port"`` strings (a worker the user starts there with
``replica-studio worker --index I``; index 0 is this machine) and :class:`SshWorker` entries
(``{"host": "gpu2", "port": 2222}``: a worker ``train`` starts itself over ssh,
engine/cluster/ssh_workers.py).

TensorFlow's gRPC servers have no authentication: whoever reaches a worker's port can run
graphs in it. So a cluster may only name loopback or private addresses unless the user
explicitly allows public ones (``strategy.allow_public_hosts`` / ``--allow-public-hosts``).
"""
from __future__ import annotations

import ipaddress
import json
import socket
from dataclasses import dataclass

from gui_app.core.ssh_hosts import Host

# Host names that are private by convention (RFC 6762, RFC 8375, common LAN suffixes).
_PRIVATE_SUFFIXES = (".local", ".lan", ".internal", ".home.arpa", ".localdomain")


def split_host(address: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) -> (host, port); ValueError naming the address."""
    host, sep, port = address.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host:
        raise ValueError(f"{address!r} is not host:port")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{address!r}: the port must be a number from 1 to 65535")
    return host, int(port)


def is_private_host(host: str) -> bool:
    """Loopback, private (RFC 1918, ULA), link-local, or a single-label / .local-style name."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        name = host.lower().rstrip(".")
        return name == "localhost" or "." not in name or name.endswith(_PRIVATE_SUFFIXES)
    return ip.is_loopback or ip.is_private or ip.is_link_local


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"


@dataclass(frozen=True)
class SshWorker:
    """A worker that ``train`` starts over ssh: ``host`` is an SSH host (docs/hosts.md: a hosts
    file entry or anything ``ssh`` accepts), ``port`` the TensorFlow gRPC port on that machine.
    Its address in the cluster is the host name ``ssh`` connects to (``ssh -G``), at ``port``."""

    host: str = ""  # both required: the checks below name a missing one
    port: int = 0


def check_hosts(hosts: tuple[str | SshWorker, ...], allow_public: bool) -> None:
    """Raise ValueError for a malformed or repeated address, or a public one not allowed. An
    :class:`SshWorker`'s address is checked when ``train`` resolves it (its name is ssh's)."""
    seen: set[tuple[str, int]] = set()
    over_ssh = any(isinstance(address, SshWorker) for address in hosts)
    for i, address in enumerate(hosts):
        if over_ssh and i > 0 and not isinstance(address, SshWorker):
            raise ValueError(f"entry {i} ({address!r}) is a worker started by hand, but the list names SSH hosts, "
                             "whose workers train starts itself: give every entry but the first as "
                             "{\"host\": ..., \"port\": ...}, or every entry as \"host:port\"")
        if isinstance(address, SshWorker):
            if i == 0:
                raise ValueError("entry 0 is this machine (the chief, which writes the run directory): give it as "
                                 "\"host:port\", the address the other workers reach it at")
            try:
                Host(address.host)
            except ValueError as exc:
                raise ValueError(f"entry {i}: {exc}") from None
            if not 1 <= address.port <= 65535:
                raise ValueError(f"entry {i}: port: the TensorFlow gRPC port there, 1 to 65535; got "
                                 f"{address.port or 'none'}")
            if (address.host, address.port) in seen:
                raise ValueError(f"lists {address.host} port {address.port} twice")
            seen.add((address.host, address.port))
            continue
        host, port = split_host(address)
        if (host, port) in seen:
            raise ValueError(f"lists {address} twice")
        seen.add((host, port))
        if not allow_public and not is_private_host(host):
            raise ValueError(f"{host} is not a loopback or private address; TensorFlow's gRPC servers have "
                             "no authentication, so set strategy.allow_public_hosts (or --allow-public-hosts) "
                             "only on a network you trust")


def check_resolved(hosts: tuple[str, ...], allow_public: bool) -> None:
    """At launch: the addresses the names resolve to must be private too (a name like ``node1``
    could point anywhere)."""
    if allow_public:
        return
    for address in hosts:
        host, _ = split_host(address)
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError as exc:
            raise ValueError(f"cannot resolve {host}: {exc}") from None
        for info in infos:
            ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])  # an IP family's sockaddr starts with the address
            if not (ip.is_loopback or ip.is_private or ip.is_link_local):
                raise ValueError(f"{host} resolves to the public address {ip}; set strategy.allow_public_hosts "
                                 "to allow it")


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` ports free on ``host`` now (held open together so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def tf_config(cluster: dict[str, list[str]], task_type: str, index: int) -> str:
    """The ``TF_CONFIG`` JSON of one task."""
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})
