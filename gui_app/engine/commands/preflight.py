"""``replica-studio preflight CONFIG [--json] [--runs-dir D] [--host HOST]``: a cluster checked
before the GPU hours are spent, without a run directory.

Every worker of a multi-worker config -- local workers, a ``strategy.cluster`` list (SSH hosts
are asked over ssh, ``preflight-probe`` there; workers started by hand are checked from here),
or the cluster of a Slurm allocation or TF_CONFIG -- gets the cheap checks
(engine/cluster/preflight_checks.py), then, when every worker can be started from here, the
all-reduce canary (engine/cluster/canary.py). Exit 0 with a table (``--json``: ``{"ok": true,
"workers": [...], "allreduce": {...}}``), or exit 2 with one line per problem on stderr.
``train`` of a cluster runs :func:`cheap_problems` itself.
"""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gui_app.core import rundir
from gui_app.core.cluster_addresses import SshWorker, free_ports, is_loopback, split_host
from gui_app.core.config import MULTI_WORKER, ConfigError, RunConfig
from gui_app.core.ssh import STDIN_FILE, HostError, check_app, config_line, explain_failure, remote_argv
from gui_app.core.ssh_hosts import HostsFileError, find_host
from gui_app.engine.cluster import preflight_checks as checks
from gui_app.engine.cluster.topology import load_config, resolve_task
from gui_app.engine.commands.reporting import one_line_errors
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK
from gui_app.engine.run.failures import InputError

COMMANDS = ("preflight", "preflight-probe", "preflight-canary")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("preflight", help="check every worker of a cluster config and all-reduce over it, "
                                                "before training (no run directory)")
    p.add_argument("config", help="the run configuration (JSON) of a multi-worker strategy")
    p.add_argument("--runs-dir", help="the runs folder train will use (default: the user data folder)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--no-canary", action="store_true", help="the cheap checks only")
    p.add_argument("--allow-public-hosts", action="store_true")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(handler=one_line_errors(run))
    # What one host says about itself (run over ssh there); no help: not a user's command.
    p = subparsers.add_parser("preflight-probe")
    p.add_argument("config")
    p.add_argument("--port", type=int)
    p.add_argument("--peers", default="")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(handler=one_line_errors(_probe_command))
    p = subparsers.add_parser("preflight-canary")
    p.add_argument("config")
    p.add_argument("--index", type=int)
    p.add_argument("--mib", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--debug", action="store_true")
    p.set_defaults(handler=_canary_command)


def _is_this_machine(host: str) -> bool:
    """Loopback, or an address of one of this machine's interfaces (binding to it works)."""
    if is_loopback(host):
        return True
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, kind, proto, _, where in infos:
        with socket.socket(family, kind, proto) as s:
            try:
                s.bind((where[0], 0))
                return True
            except OSError:
                continue
    return False


def plan(config: RunConfig) -> list[dict[str, Any]]:
    """Every worker: index, address, host (where it runs), kind (local | ssh | elsewhere)."""
    cfg = config.strategy
    if cfg.name not in MULTI_WORKER:
        raise ConfigError(f"strategy.name: preflight checks a multi-worker config (multi_worker_mirrored or "
                          f"parameter_server); this one is {cfg.name!r}, which trains in one process")
    if cfg.cluster is None:  # train starts them here on free loopback ports, as these
        ports = free_ports(cfg.workers + cfg.ps)
        return [{"index": i, "address": f"127.0.0.1:{p}", "host": "127.0.0.1", "kind": "local",
                 "name": f"worker {i}" if i < cfg.workers else f"ps {i - cfg.workers}"} for i, p in enumerate(ports)]
    entries: list[str | SshWorker]
    if isinstance(cfg.cluster, tuple):
        entries = list(cfg.cluster)
    else:  # inside a Slurm allocation or a pod set: its cluster, this process one of its workers
        task = resolve_task(cfg, None)
        entries = [*task.cluster.get("chief", []), *task.cluster.get("worker", [])]
    workers = []
    for i, entry in enumerate(entries):
        if isinstance(entry, SshWorker):
            workers.append({"index": i, "address": f"{entry.host}:{entry.port}", "host": entry.host, "kind": "ssh",
                            "port": entry.port})
            continue
        host = split_host(entry)[0]
        if isinstance(cfg.cluster, tuple):  # entry 0 is this machine; another entry may name one of its addresses
            over_ssh = any(isinstance(e, SshWorker) for e in entries)
            local = i == 0 or (not over_ssh and _is_this_machine(host))
        else:
            local = _is_this_machine(host)
        workers.append({"index": i, "address": entry, "host": host, "kind": "local" if local else "elsewhere"})
    return workers


def _where(w: dict[str, Any]) -> str:
    return f"on {w['host']} ({w['address']})" if w["kind"] == "ssh" else f"at {w['address']}"


def gather(config: RunConfig, config_file: str, workers: list[dict[str, Any]], runs_dir: Path) -> None:
    """Fill each worker's ``facts`` (or ``error``) and ``where``. A port is checked where this
    process starts the worker (local workers, the chief): one started by hand may be there already."""
    for w in workers:
        w["where"] = _where(w)
        if w["kind"] == "ssh":  # first: its address becomes ssh's host name, which the others connect to
            _probe_over_ssh(config_file, w, [x["address"] for x in workers if x is not w and x["kind"] != "ssh"])
    # (an SSH host that failed its check has no address yet: its own line says why)
    others = [w["address"] for w in workers if w["kind"] != "local" and not w.get("error")]
    for w in workers:
        if w["kind"] == "local":
            starts_here = w["index"] == 0 or config.strategy.cluster is None
            port = split_host(w["address"])[1] if starts_here else None
            w["facts"] = checks.probe(config, port, others if w["index"] == 0 else [],
                                      runs_dir if w["index"] == 0 else None)
            w["clock_offset_s"] = 0.0
    seen = {a: said for w in workers if w.get("facts") for a, said in w["facts"]["peers"].items()}
    for w in workers:
        if w["kind"] == "elsewhere":  # started by hand there: only what this machine can see
            w["facts"] = None
            w["reach"] = said = seen.get(w["address"]) or checks.connect(w["address"])
            if said.startswith("unreachable") and w["address"] not in seen:  # else a local worker's line says it
                w["error"] = (f"{w['address']} is {said} from this machine; check the address and that the "
                              "port is open between the machines")


def _probe_over_ssh(config_file: str, w: dict[str, Any], peers: list[str]) -> None:
    from gui_app.engine.cluster.ssh_workers import _bracketed, _host_name

    try:
        host = find_host(w["host"])
        check_app(host)
        w["address"] = f"{_bracketed(_host_name(host))}:{w['port']}"
        w["where"] = _where(w)
        argv = remote_argv(host, ["preflight-probe", STDIN_FILE, "--port", str(w["port"]), "--peers", ",".join(peers)])
        sent = time.time()
        done = subprocess.run(argv, input=config_line(config_file).decode("utf-8"), capture_output=True, text=True,
                              errors="replace", timeout=120, start_new_session=True)
        received = time.time()
    except (HostError, HostsFileError) as exc:
        w["facts"], w["error"] = None, str(exc)
        return
    except subprocess.TimeoutExpired:
        w["facts"], w["error"] = None, f"{w['host']}: no answer within 120 s"
        return
    if done.returncode != 0:
        w["facts"] = None
        w["error"] = (explain_failure(host, done.stderr) if done.returncode == 255
                      else (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1])
        return
    w["facts"] = json.loads(done.stdout.strip().splitlines()[-1])
    w["clock_offset_s"] = w["facts"]["time"] - (sent + received) / 2


def cheap_problems(config: RunConfig, runs_dir: Path) -> list[str]:
    """The checks ``train`` of a cluster runs before it makes the run directory: this machine's
    workers and the addresses it can see (SSH hosts are checked by the launcher's own release
    check, engine/cluster/ssh_workers.py). One line per problem."""
    workers = [w for w in plan(config) if w["kind"] != "ssh"]
    config_file = ""  # no probe over ssh here
    gather(config, config_file, workers, runs_dir)
    need, _ = checks.checkpoint_bytes(config)
    lines = checks.problems(workers, need)
    return lines + [f"worker {w['index']} {w['where']}: {w['error']}" for w in workers if w.get("error")]


def run(args) -> int:
    config = load_config(args.config, args.allow_public_hosts)
    runs_dir = Path(args.runs_dir).expanduser() if args.runs_dir else rundir.default_runs_dir()
    workers = plan(config)
    gather(config, args.config, workers, runs_dir)
    need, estimate = checks.checkpoint_bytes(config)
    problems = checks.problems(workers, need)
    problems += [f"worker {w['index']}: {w['error']}" if w["kind"] == "ssh"  # the line names its host
                 else f"worker {w['index']} {w['where']}: {w['error']}" for w in workers if w.get("error")]
    allreduce = _canary(config, args, workers) if not problems and not args.no_canary else \
        {"ran": False, "why": "--no-canary" if args.no_canary else "the checks above failed"}
    if allreduce.get("problem"):
        problems.append(f"all-reduce canary: {allreduce['problem']}")
    ok = not problems
    report = {"ok": ok, "workers": [_public(w) for w in workers], "allreduce": allreduce,
              "checkpoint_bytes": need, "checkpoint_estimate": estimate}
    if not ok:
        report["problems"] = problems
        for line in problems:
            print(f"replica-studio preflight: {line}", file=sys.stderr, flush=True)
    table = _table(report)
    print(json.dumps({**report, "table": table}) if args.json else table, flush=True)
    return EXIT_OK if ok else EXIT_BAD_INPUT


def _public(w: dict[str, Any]) -> dict[str, Any]:
    keep = ("index", "name", "address", "host", "kind", "where", "facts", "clock_offset_s", "reach", "error")
    return {k: w[k] for k in keep if k in w}


def _canary(config: RunConfig, args, workers: list[dict[str, Any]]) -> dict[str, Any]:
    from gui_app.engine.cluster.canary import run_canary

    if config.strategy.name != "multi_worker_mirrored":
        return {"ran": False, "why": "parameter servers do not all-reduce: each worker updates the variables on them"}
    if any(w["kind"] == "elsewhere" for w in workers):
        return {"ran": False, "why": "the canary starts every worker itself: on this machine or over ssh, not "
                                     "workers started by hand elsewhere"}
    join = config.strategy.join_timeout_s
    if any(w["kind"] == "ssh" for w in workers):  # the chief here, the others on their hosts, as train does
        from gui_app.engine.cluster.ssh_workers import ssh_cluster

        try:
            with ssh_cluster(config) as ssh:
                assert ssh is not None  # the list names SSH hosts
                result = run_canary(str(ssh.config_file), list(ssh.addresses), True, join, ssh=ssh)
        except InputError as exc:
            return {"ran": False, "ok": False, "problem": str(exc)}
    else:
        result = run_canary(args.config, [w["address"] for w in workers], isinstance(config.strategy.cluster, tuple),
                            join)
    result["ran"] = True
    return result


def _table(report: dict[str, Any]) -> str:
    rows = [("task", "where", "app", "python", "tensorflow", "keras", "port", "free space", "clock")]
    for w in report["workers"]:
        f, task = w.get("facts"), w.get("name", f"worker {w['index']}")
        if not f:
            rows.append((task, w["where"], *(["?"] * 4), "-", "-", w.get("reach", "-")))
            continue
        v, free = f["versions"], f["folder"]["free_bytes"]
        rows.append((task, w["where"], v["app"], v["python"], v["tensorflow"] or "-", v["keras"] or "-",
                     "free" if f["port"] is None else f["port"], "?" if free is None else f"{free / 2**30:.1f} GiB",
                     f"{w.get('clock_offset_s', 0):+.2f} s"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in rows]
    lines.append(f"checkpoints: about {report['checkpoint_bytes'] / 2**20:.1f} MiB ({report['checkpoint_estimate']})")
    a = report["allreduce"]
    if a.get("ran") and "seconds_median" in a:
        lines.append(f"all-reduce: {a['bytes'] / 2**20:.0f} MiB x {a['rounds']} rounds over {a['workers']} workers "
                     f"({a['replicas']} replicas): median {a['seconds_median'] * 1000:.1f} ms, "
                     f"{a['bandwidth_per_worker_mib_s']:.0f} MiB/s per worker, "
                     f"{'every worker got the same sum' if a['same_sum'] else 'the sums differ'}")
    elif not a.get("ran"):
        lines.append(f"all-reduce: not run ({a['why']})")
    lines.append("ok" if report["ok"] else f"{len(report.get('problems', []))} problem(s): see above")
    return "\n".join(lines)


def _probe_command(args) -> int:
    config = RunConfig.load(args.config)
    peers = [p for p in args.peers.split(",") if p]
    print(json.dumps(checks.probe(config, args.port, peers, None)), flush=True)
    return EXIT_OK


def _canary_command(args) -> int:
    """One canary worker: its figures as one JSON line, then it leaves the cluster with the others."""
    from gui_app.engine.cluster.canary import canary_worker
    from gui_app.engine.cluster.leaving import leave

    try:
        config = load_config(args.config)
        figures = canary_worker(config, args.index, args.mib, args.rounds)
    except Exception as exc:  # noqa: BLE001 - one line for the launcher (processes.py keeps it)
        from gui_app.engine.run.failures import one_line

        print(f"replica-studio worker: {one_line(exc)}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT if isinstance(exc, (ConfigError, ValueError)) else 1
    task = figures.pop("task")
    print(json.dumps(figures), flush=True)
    leave(task, EXIT_OK, barrier_s=60)
    return EXIT_OK
