"""A real Slurm for the tests: Debian's ``slurmctld`` and two ``slurmd`` named node9 and node10.

:func:`running_slurm` (a module fixture of tests/engine/test_slurm.py) makes two network
namespaces joined by a bridge (this machine 10.78.0.1, node9 10.78.0.9, node10 10.78.0.10), maps
the node names in ``/etc/hosts`` (TensorFlow reaches the workers by node name), starts ``munged``
if it is not running (and ends it afterwards), then ``slurmctld`` here and one ``slurmd`` in each
namespace with a ``slurm.conf`` of the test's own (``SLURM_CONF``), and waits until both nodes
are idle. node9 and node10 sort the other way as text than as Slurm lists them: the order bug
TensorFlow's SlurmClusterResolver had.

Facts it relies on (Slurm 22.05, Debian 12): ``SlurmctldHost`` must be this machine's hostname;
``ProctrackType=proctrack/linuxproc`` and ``TaskPlugin=task/none`` need no cgroups; each ``slurmd``
starts under ``nsenter --net`` (``ip netns exec`` remounts /sys and slurmd then fails on cgroups).

Everything is removed at the end (the daemons, the jobs' processes, the namespaces, the bridge,
the /etc/hosts lines). Skipped with the reason where it cannot be made: not Linux, not root, no
``ip``/``nsenter``, no Slurm or munge.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

BRIDGE, HOST_IP = "rs-br0", "10.78.0.1"
NODES = {"node9": "10.78.0.9", "node10": "10.78.0.10"}  # in Slurm's order; as text node10 sorts first
HOSTS_FILE = Path("/etc/hosts")
HOSTS_MARK = "# replica-studio slurm test"
NEEDED = ("ip", "nsenter", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel", "munged")

_CONF = """\
ClusterName=rstest
SlurmctldHost={host}({host_ip})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool-%n
SlurmctldPidFile={base}/slurmctld.pid
SlurmdPidFile={base}/slurmd-%n.pid
SlurmctldLogFile={base}/log/slurmctld.log
SlurmdLogFile={base}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
KillWait=30
AuthInfo=cred_expire=10
MinJobAge=600
{nodes}
PartitionName=debug Nodes={node_names} Default=YES MaxTime=INFINITE State=UP
"""


def _run(*cmd: str, check: bool = True, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=timeout, env=env)


@dataclass
class SlurmCluster:
    base: Path  # the test's folder: config, state, logs
    env: dict[str, str]  # SLURM_CONF for the clients

    def run(self, *cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return _run(*cmd, check=check, env={**os.environ, **self.env}, timeout=timeout)

    def app_env(self) -> dict[str, str]:
        """The app's environment for a command that submits to this Slurm: its clients' config, and
        the app's own command for the job scripts (REPLICA_STUDIO)."""
        from gui_app.identity import app_command, app_env

        return app_env({**self.env, "TF_CPP_MIN_LOG_LEVEL": "2",
                        "REPLICA_STUDIO": " ".join(shlex.quote(a) for a in app_command())})

    def sbatch(self, script: Path, *options: str, env: dict[str, str] | None = None) -> str:
        """Submit ``script``; the job id."""
        done = subprocess.run(["sbatch", "--parsable", *options, str(script)], capture_output=True, text=True,
                              timeout=60, env={**(env or os.environ), **self.env}, cwd=script.parent)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job``'s fields (JobState, Restarts, NodeList, ...); {} once Slurm forgot it."""
        done = self.run("scontrol", "-o", "show", "job", job_id, check=False)
        if done.returncode != 0:
            return {}
        return dict(part.split("=", 1) for part in done.stdout.split() if "=" in part)

    def wait_state(self, job_id: str, states: tuple[str, ...], timeout: float = 300,
                   restarted: bool = False) -> dict[str, str]:
        """Poll until the job is in one of ``states`` (and, with ``restarted``, was requeued);
        Slurm offers no notification to wait on."""
        deadline = time.monotonic() + timeout
        job: dict[str, str] = {}
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job.get("JobState") in states and (not restarted or int(job.get("Restarts", "0")) > 0):
                return job
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} not in {states} after {timeout:g} s: {job.get('JobState')} "
                             f"{job.get('Reason')}\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:]
                         for p in sorted((self.base / "log").glob("*.log")))


class _Setup:
    """What was made, so that teardown removes exactly that."""

    def __init__(self) -> None:
        self.daemons: list[subprocess.Popen] = []
        self.namespaces: list[str] = []
        self.links: list[str] = []
        self.hosts_added = False
        self.munged: int | None = None  # the pid of the munged started here

    def teardown(self, env: dict[str, str]) -> None:
        with contextlib.suppress(Exception):
            _run("scancel", "--user=root", check=False, env={**os.environ, **env})
        for proc in reversed(self.daemons):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        for ns in self.namespaces:  # the jobs' processes left in a namespace (a killed slurmstepd's)
            pids = _run("ip", "netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            _run("ip", "netns", "delete", ns, check=False)
        for link in self.links:
            _run("ip", "link", "delete", link, check=False)
        if self.munged is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.munged, signal.SIGTERM)
        if self.hosts_added:
            lines = HOSTS_FILE.read_text().splitlines(keepends=True)
            HOSTS_FILE.write_text("".join(line for line in lines if HOSTS_MARK not in line))


def _why_not() -> str | None:
    if sys.platform != "linux":
        return "a real Slurm needs Linux"
    if os.geteuid() != 0:
        return "a real Slurm needs root (network namespaces, /etc/hosts, slurmd)"
    missing = [tool for tool in NEEDED if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()]
    if missing:
        return f"not installed: {', '.join(missing)} (Debian: slurmctld slurmd slurm-client munge iproute2)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST_IP, 0))
        return s.getsockname()[1]


def _network(setup: _Setup) -> None:
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    setup.links.append(BRIDGE)
    _run("ip", "addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    for name, address in NODES.items():
        ns, here, there = f"rs-{name}", f"rs-{name}-h", f"rs-{name}-n"
        _run("ip", "netns", "add", ns)
        setup.namespaces.append(ns)
        _run("ip", "link", "add", here, "type", "veth", "peer", "name", there)
        setup.links.append(here)
        _run("ip", "link", "set", there, "netns", ns)
        _run("ip", "link", "set", here, "master", BRIDGE)
        _run("ip", "link", "set", here, "up")
        _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{address}/24", "dev", there)
        _run("ip", "netns", "exec", ns, "ip", "link", "set", there, "up")
        _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
    lines = "".join(f"{address} {name}  {HOSTS_MARK}\n" for name, address in NODES.items())
    text = HOSTS_FILE.read_text()
    HOSTS_FILE.write_text(text + ("" if text.endswith("\n") else "\n") + lines)
    setup.hosts_added = True


def _munge(setup: _Setup) -> None:
    """munged as the munge user, with a key, unless one already answers."""
    if _run("munge", "-n", check=False).returncode == 0:
        return
    run_dir, key = Path("/run/munge"), Path("/etc/munge/munge.key")
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.chown(run_dir, "munge", "munge")
    if not key.exists():
        _run("mungekey", "--create", "--keyfile", str(key))
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
    (run_dir / "munged.pid").unlink(missing_ok=True)  # a stale one from an earlier boot stops munged
    _run("runuser", "-u", "munge", "--", "munged")
    deadline = time.monotonic() + 10
    while _run("munge", "-n", check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("munged did not start")
        time.sleep(0.2)
    setup.munged = int((run_dir / "munged.pid").read_text())


def _daemon(setup: _Setup, log: Path, *cmd: str) -> None:
    setup.daemons.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log.open("ab"),
                                          stderr=subprocess.STDOUT))


@contextlib.contextmanager
def running_slurm() -> Iterator[SlurmCluster]:
    why = _why_not()
    if why:
        pytest.skip(why)
    base = Path(tempfile.mkdtemp(prefix="rs-slurm-"))
    base.chmod(0o711)  # another user (a login node's, over ssh: tests/ssh_host.py) reads slurm.conf
    (base / "log").mkdir()
    (base / "state").mkdir()
    conf = base / "slurm.conf"
    nodes = "\n".join(f"NodeName={name} NodeAddr={address} CPUs=2 State=UNKNOWN" for name, address in NODES.items())
    env = {"SLURM_CONF": str(conf)}
    setup = _Setup()
    try:
        try:
            _network(setup)
            conf.write_text(_CONF.format(host=socket.gethostname(), host_ip=HOST_IP, base=base, nodes=nodes,
                                         node_names=",".join(NODES), ctld_port=_free_port(),
                                         slurmd_port=_free_port()))
            _munge(setup)
            _daemon(setup, base / "log" / "slurmctld.out", "slurmctld", "-D", "-c", "-f", str(conf))
            for name in NODES:
                _daemon(setup, base / "log" / f"slurmd-{name}.out", "nsenter", f"--net=/run/netns/rs-{name}",
                        "slurmd", "-D", "-f", str(conf), "-N", name)
            cluster = SlurmCluster(base, env)
            _wait_idle(cluster)
        except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
            pytest.skip(f"cannot start a real Slurm here: {exc}")
        yield cluster
    finally:
        setup.teardown(env)
        shutil.rmtree(base, ignore_errors=True)


def _wait_idle(cluster: SlurmCluster, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    resumed = False
    while time.monotonic() < deadline:
        states = cluster.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split("\n")
        state = dict(line.split() for line in states if line.strip())
        if len(state) == len(NODES) and all(s == "idle" for s in state.values()):
            return
        if not resumed and any(s.startswith("down") or s.startswith("drain") for s in state.values()):
            cluster.run("scontrol", "update", f"nodename={','.join(NODES)}", "state=resume", check=False)
            resumed = True
        time.sleep(0.5)
    raise RuntimeError(f"the nodes did not become idle in {timeout:g} s\n{cluster.logs()}")
