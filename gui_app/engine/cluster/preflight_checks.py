"""The cheap checks of ``preflight`` (and of ``train`` of a cluster): TensorFlow-free, seconds.

What one host says about itself (:func:`probe`, run here for the workers of this machine and
as ``preflight-probe`` over ssh on an SSH host, so the dataset paths and the runs folder are
that host's): the app, Python, TensorFlow and Keras versions (from the installed packages'
metadata: importing TensorFlow would cost seconds a worker), whether its worker port is free
to bind, whether the other workers' addresses answer from there, the dataset paths readable,
a folder to write checkpoints in and its free space, and its clock. :func:`problems` turns the
facts of every worker into one line per problem, naming the worker, where it is and what to do.
"""
from __future__ import annotations

import errno
import os
import platform
import socket
import stat
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

from gui_app import __version__
from gui_app.core.cluster_addresses import split_host
from gui_app.core.config import RunConfig
from gui_app.core.disk import MARGIN_BYTES
from gui_app.core.ssh import compatible

CONNECT_TIMEOUT_S = 2.0  # a reachable host answers a connect (accept or refuse) within milliseconds
CLOCK_LIMIT_S = 2.0  # more apart than this and the run's timestamps (events, TensorBoard) disagree
# Parameters of the built-in models at the largest input the bundled datasets give (32x32x3,
# 100 classes; measured with models.build_model, Keras 3.15), for the checkpoint estimate
# without building the model here (that needs TensorFlow: seconds, not milliseconds).
MODEL_PARAMETERS = {"mnist_cnn": 935_524, "cifar_cnn": 128_420, "mlp": 832_484, "resnet20": 279_892,
                    "mobilenet_v2": 2_386_084}
# Optimizer slots per weight (each a float32 copy saved in every checkpoint).
_SLOTS = {"sgd": 0, "momentum": 1, "rmsprop": 1, "adam": 2, "adamw": 2}


def versions() -> dict[str, str | None]:
    def installed(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {"app": __version__, "python": platform.python_version(),
            "tensorflow": installed("tensorflow") or installed("tensorflow-cpu"), "keras": installed("keras")}


def port_free(port: int) -> str | None:
    """None when ``port`` can be bound on every interface (TensorFlow's gRPC server listens on
    0.0.0.0), else why not."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is free
        s.bind(("", port))
        return None
    except OSError as exc:
        return "taken by another program" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
    finally:
        s.close()


def connect(address: str) -> str:
    """``open`` (something listens), ``refused`` (the host answered, nothing listens yet) or
    ``unreachable: WHY``."""
    host, port = split_host(address)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"unreachable: cannot resolve {host} ({exc.strerror})"
    family, kind, proto, _, where = infos[0]
    s = socket.socket(family, kind, proto)
    s.settimeout(CONNECT_TIMEOUT_S)
    try:
        s.connect(where)
        return "open"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return f"unreachable: no answer within {CONNECT_TIMEOUT_S:g} s (a firewall, or the host is down)"
    except OSError as exc:  # no route, or an address this machine cannot send to (EINVAL)
        return f"unreachable: {exc.strerror or exc}"
    finally:
        s.close()


def connect_all(addresses: list[str]) -> dict[str, str]:
    if not addresses:
        return {}
    with ThreadPoolExecutor(max_workers=min(16, len(addresses))) as pool:  # unreachable ones time out together
        return dict(zip(addresses, pool.map(connect, addresses)))


def input_paths(config: RunConfig) -> list[tuple[str, str]]:
    """(key, path) of every file or folder the workers read: paths on each worker's host."""
    d, m = config.dataset, config.model
    found = [("dataset.path", d.path), ("dataset.test_path", d.test_path), ("dataset.data_dir", d.data_dir),
             ("model.path", m.path)]
    return [(key, path) for key, path in found if path]


def readable(path: str) -> str | None:
    p = Path(path).expanduser()
    try:
        mode = p.stat().st_mode
    except PermissionError:  # a folder on the way that this user cannot enter
        return "not readable by this user"
    except OSError:
        return "missing"
    if not os.access(p, os.R_OK | (os.X_OK if stat.S_ISDIR(mode) else 0)):
        return "not readable by this user"
    return None


def writable(folder: Path) -> dict[str, Any]:
    """Whether a file can be created in ``folder`` (made if missing; the parent that exists is
    what counts for the free space) and its disk's free bytes."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        test = folder / f".preflight-{os.getpid()}"
        test.write_bytes(b"x")
        test.unlink()
        problem = None
    except OSError as exc:
        problem = exc.strerror or str(exc)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        free = os.statvfs(existing).f_bavail * os.statvfs(existing).f_frsize
    except OSError:
        free = None
    return {"folder": str(folder), "problem": problem, "free_bytes": free}


def probe(config: RunConfig, port: int | None, peers: list[str], runs_dir: Path | None) -> dict[str, Any]:
    """What this host says about itself for one worker (JSON-ready). ``runs_dir``: the chief's
    runs folder; other workers keep a temporary copy of the checkpoints in the temp folder."""
    folder = runs_dir if runs_dir is not None else Path(tempfile.gettempdir())
    return {"versions": versions(), "port": None if port is None else port_free(port),
            "peers": connect_all(peers),
            "inputs": {path: problem for _, path in input_paths(config) if (problem := readable(path))},
            "folder": writable(folder), "time": time.time()}


def checkpoint_bytes(config: RunConfig) -> tuple[int, str]:
    """(bytes the kept checkpoints need, how that was estimated)."""
    t = config.training
    copies = (1 + _SLOTS.get(t.optimizer, 2)) * t.keep_checkpoints
    if config.model.name == "keras_file" and config.model.path:
        try:
            size = Path(config.model.path).expanduser().stat().st_size
            return size * copies + MARGIN_BYTES, f"{config.model.path} ({size / 2**20:.1f} MiB) x {copies}"
        except OSError:
            return MARGIN_BYTES, "the model file is missing"
    params = MODEL_PARAMETERS.get(config.model.name, 0)
    return (params * 4 * copies + MARGIN_BYTES,
            f"about {params:,} float32 parameters of {config.model.name} x (1 + {copies // t.keep_checkpoints - 1} "
            f"optimizer slots) x {t.keep_checkpoints} kept checkpoints")


def problems(workers: list[dict[str, Any]], need: int) -> list[str]:
    """One line per problem of ``workers`` (each: index, where, host, address, facts), against
    the chief's (index 0) versions; a worker without facts is only named as a peer."""
    chief = next((w["facts"]["versions"] for w in workers if w["index"] == 0 and w.get("facts")), versions())
    lines = []
    for w in workers:
        task = w.get("name", f"worker {w['index']}")  # a parameter-server cluster's ps tasks: "ps 0"
        name = f"{task}{' (chief)' if w['index'] == 0 else ''} {w['where']}"
        f = w.get("facts")
        if f is None:  # not asked (a worker started by hand elsewhere) or no answer: the caller's line
            continue
        v = f["versions"]
        if not compatible(v["app"] or "", chief["app"] or ""):
            lines.append(f"{name} has replica-studio {v['app']}, the chief {chief['app']}: install the same release")
        for key, label in (("python", "Python"), ("tensorflow", "TensorFlow"), ("keras", "Keras")):
            ours, theirs = chief[key], v[key]
            same = (ours or "").split(".")[:2] == (theirs or "").split(".")[:2] if key == "python" else ours == theirs
            if not same:
                lines.append(f"{name} has {label} {theirs or 'missing'}, the chief {ours}: install the chief's version")
        if f["port"] is not None:
            port = split_host(w["address"])[1]
            lines.append(f"{name}: port {port} on {w['host']} is {f['port']}; free it or give this worker "
                         "another port in strategy.cluster")
        for address, said in f["peers"].items():
            if said.startswith("unreachable"):
                peer = next((f"{p.get('name', 'worker ' + str(p['index']))} at {address}" for p in workers
                             if p["address"] == address), address)
                lines.append(f"{peer} is unreachable from worker {w['index']} on {w['host']} "
                             f"({said[len('unreachable: '):]}); check the address and that the port is open "
                             "between the machines")
        for path, said in f["inputs"].items():
            lines.append(f"{name}: {path} is {said} on {w['host']} (dataset and model paths are each host's); "
                         "copy it there or fix the path")
        folder = f["folder"]
        if folder["problem"]:
            lines.append(f"{name}: cannot write in {folder['folder']} on {w['host']} ({folder['problem']}); "
                         "choose a writable runs folder (--runs-dir)")
        elif folder["free_bytes"] is not None and folder["free_bytes"] < need:
            lines.append(f"{name}: {folder['folder']} on {w['host']} has {folder['free_bytes'] / 2**20:.1f} MiB free "
                         f"but the checkpoints need about {need / 2**20:.1f} MiB; free some space")
        offset = w.get("clock_offset_s")
        if offset is not None and abs(offset) > CLOCK_LIMIT_S:
            lines.append(f"{name}: its clock is {abs(offset):.1f} s {'ahead of' if offset > 0 else 'behind'} this "
                         "machine's; synchronise it (NTP, chrony)")
    return lines
