"""Cluster addresses and ``TF_CONFIG`` (TensorFlow-free: the config and the window use it).

TensorFlow's gRPC servers have no authentication: whoever reaches a worker's port can run
graphs in it. So a cluster may only name loopback or private addresses unless the user
explicitly allows public ones (``strategy.allow_public_hosts`` / ``--allow-public-hosts``).
"""
from __future__ import annotations

import ipaddress
import json
import socket

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


def check_hosts(hosts: tuple[str, ...], allow_public: bool) -> None:
    """Raise ValueError for a malformed or repeated address, or a public one not allowed."""
    seen = set()
    for address in hosts:
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
