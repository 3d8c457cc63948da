"""``replica-studio hosts``: the SSH hosts that ``--host`` reaches (gui_app/core/ssh_hosts.py).

    replica-studio hosts add gpu1 [--port 2222] [--command '~/venv/bin/replica-studio'] [--runs-dir /data/runs]
    replica-studio hosts list [--json]
    replica-studio hosts remove gpu1
    replica-studio hosts test gpu1 [--json]      # the app's version there, and the devices it sees
    replica-studio hosts reconnect gpu1 [--json] # end the shared connections, then test on a new one
    replica-studio hosts fetch gpu1 PATH --to DIR [--json]  # copy a file or folder there into DIR here

A host that ssh reaches with the defaults needs no entry (``--host user@gpu1`` works as is).
Errors are one line on stderr and exit 2, as for ``--host``.
"""
from __future__ import annotations

import argparse
import json
import posixpath
import subprocess
import sys
from pathlib import Path

from gui_app.core.answers import Fetched, encode
from gui_app.core.ssh import SSH_FAILED, HostError, check_app, close_connection, explain_failure, remote_argv
from gui_app.core.ssh_files import fetch
from gui_app.core.ssh_hosts import DEFAULT_COMMAND, Host, HostsFileError, add_host, find_host, load_hosts, remove_host
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK

COMMANDS = ("hosts",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    hosts = subparsers.add_parser("hosts", help="the SSH hosts that --host reaches: add, list, remove, test",
                                  description="SSH hosts for --host: the system ssh client reaches them with your "
                                              "keys, agent, ~/.ssh/config and known_hosts.")
    actions = hosts.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = actions.add_parser("add", help="add a host, or change the one of that name")
    p.add_argument("name", metavar="HOST", help="user@host or a ~/.ssh/config alias")
    p.add_argument("--port", type=int, help="the ssh port (default: ssh's own choice)")
    p.add_argument("--command", dest="remote_command", default=DEFAULT_COMMAND, metavar="CMD",
                   help=f"what starts the app there, as shell words (default {DEFAULT_COMMAND}; "
                        "e.g. '~/venv/bin/replica-studio' or 'conda run -n tf replica-studio')")
    p.add_argument("--runs-dir", help="the runs folder there (default: the app's own default there)")
    p = actions.add_parser("list", help="the hosts added")
    p.add_argument("--json", action="store_true", help="print JSON")
    p = actions.add_parser("remove", help="forget a host (and end its shared connection)")
    p.add_argument("name", metavar="HOST")
    p = actions.add_parser("test", help="connect, and show the app's version there and the devices it sees")
    p.add_argument("name", metavar="HOST")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p = actions.add_parser("reconnect", help="end the shared connections to a host (a changed server, a stale "
                                             "connection), then test it on a new one")
    p.add_argument("name", metavar="HOST")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p = actions.add_parser("fetch", help="copy a file or folder from a host into a folder here (over the shared "
                                         "connection; the window copies a run's misclassified images so)")
    p.add_argument("name", metavar="HOST")
    p.add_argument("path", metavar="PATH", help="the file or folder there")
    p.add_argument("--to", required=True, metavar="DIR", help="the folder here it is copied into (by its name)")
    p.add_argument("--json", action="store_true", help="print one JSON object (docs/answers.md, Fetched)")
    hosts.set_defaults(handler=_hosts)


def _hosts(args: argparse.Namespace) -> int:
    try:
        action = {"add": _add, "list": _list, "remove": _remove, "test": _test, "reconnect": _reconnect,
                  "fetch": _fetch}[args.action]
        return action(args)
    except (HostError, HostsFileError, ValueError) as exc:
        print(f"replica-studio hosts {args.action}: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT


def _add(args: argparse.Namespace) -> int:
    host = Host(args.name, args.port, args.remote_command, args.runs_dir)
    print(f"{'changed' if add_host(host) else 'added'} {host.name}")
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    hosts = list(load_hosts().values())
    if args.json:
        print(json.dumps([h.to_dict() for h in hosts]))
        return EXIT_OK
    for h in hosts:
        port = f" port {h.port}" if h.port is not None else ""
        print(f"{h.name}{port}: {h.command}, runs in {h.runs_dir or 'its default folder'}")
    if not hosts:
        print("no hosts yet (replica-studio hosts add HOST; --host also takes any host ssh reaches)")
    return EXIT_OK


def _remove(args: argparse.Namespace) -> int:
    host = remove_host(args.name)
    close_connection(host)
    print(f"removed {host.name}")
    return EXIT_OK


def _reconnect(args: argparse.Namespace) -> int:
    ended = close_connection(find_host(args.name))
    if not args.json:
        print(f"{args.name}: {ended or 'no'} shared connection{'s' if ended != 1 else ''} ended; connecting anew")
    return _test(args)


def _fetch(args: argparse.Namespace) -> int:
    folder = Path(args.to)
    if not folder.is_dir():
        raise ValueError(f"--to {args.to}: no such folder here")
    fetch(find_host(args.name), args.path, folder)
    arrived = folder / posixpath.basename(args.path.rstrip("/"))
    print(json.dumps(encode(Fetched(Fetched.TYPE, str(arrived)))) if args.json else f"copied to {arrived}")
    return EXIT_OK


def _test(args: argparse.Namespace) -> int:
    host = find_host(args.name)
    version = check_app(host)
    devices = subprocess.run(remote_argv(host, ["devices", *(["--json"] if args.json else [])]),
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace")
    if devices.returncode == SSH_FAILED:
        raise HostError(explain_failure(host, devices.stderr))
    if devices.returncode != 0:
        sys.stderr.write(devices.stderr)
        return devices.returncode
    if args.json:
        print(json.dumps({**host.to_dict(), "version": version, "devices": json.loads(devices.stdout)}))
    else:
        print(f"{host.name}: replica-studio {version} ({host.command}), "
              f"runs in {host.runs_dir or 'its default folder'}")
        print(devices.stdout, end="")
    return EXIT_OK
