"""The stall watch a scheduler-run chief hosts (engine/cluster/chief_watch.py), without TensorFlow:
the other worker reports to the chief's own address (UDP, the port of its gRPC address) with the
token both derive from the run; when its reports stop, the chief's events get a ``stall`` naming it
"not answering" (its /proc is on another node), with the chief's own process seen from here; the
next step writes ``stall_cleared``; TensorFlow's heartbeat failure then carries the stall's words.
The same code serves Slurm (``--cluster slurm``) and Kubernetes (``--cluster kubernetes``, which
becomes TF_CONFIG): both resolve to a task of a worker list, which is all the watch reads."""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time

import pytest
from engine_helpers import until

from gui_app.core.cluster_addresses import free_ports
from gui_app.core.events import RunStarted, Step
from gui_app.engine.cluster import chief_watch
from gui_app.engine.cluster.topology import Task
from gui_app.engine.commands import worker

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

CONFIG = '{"run": "the same config on every worker"}'


def _task(index: int, ports: list[int]) -> Task:
    return Task({"worker": [f"127.0.0.1:{p}" for p in ports]}, "worker", index)


def _events(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_the_chief_names_a_worker_that_stopped_answering_and_the_next_step_clears_it():
    ports = free_ports(2)
    stream = io.StringIO()
    events = chief_watch.WatchedEvents("jsonl", stream)
    watch = chief_watch.ChiefWatch(_task(0, ports), CONFIG, events, paused=lambda: False)
    other = chief_watch.reporter_to_chief(_task(1, ports), CONFIG)
    assert other is not None and other.address == ("127.0.0.1", ports[0]) and other.token == watch.board.token
    try:
        until(lambda: {0, 1} <= set(watch.board.latest()), 10, "both workers' reports on the chief's board")
        events.emit(RunStarted(run_dir="run", config={}, total_steps=100))
        start = time.monotonic() - 0.3
        with watch._lock:  # five step groups 50 ms apart, just now (as the chief's steps feed it)
            for step in range(1, 6):
                watch.stalls.on_step(step, now=start + step * 0.05)
        other.close()  # its reports stop, as a frozen worker's do
        stall = until(lambda: next((e for e in _events(stream) if e["type"] == "stall"), None), 15, "a stall")
        assert stall["worker"] == 1 and "stopped answering" in stall["reason"] and stall["since_step"] == 5
        seen = {w["worker"]: w for w in stall["workers"]}
        assert seen[1]["state"] == "not answering" and seen[1].get("os_state") is None
        assert seen[1]["host"] == "127.0.0.1" and seen[1]["phase"] == "starting"
        assert seen[0]["state"] == "running" and seen[0]["pid"] == os.getpid() and seen[0]["os_state"][0] in "RS"
        # TensorFlow's heartbeat failure meanwhile: the chief's error says what the stall saw.
        w = worker._Worker(chief=True, events=events, watch=watch)
        worker._failed(argparse.Namespace(debug=False),
                               ConnectionError("UnavailableError: worker 1 stopped sending heartbeats"), w)
        error = next(e for e in _events(stream) if e["type"] == "error")
        assert "; before it: " in error["message"] and "worker 1" in error["message"]
        events.emit(Step(step=6))
        cleared = [e for e in _events(stream) if e["type"] == "stall_cleared"]
        assert len(cleared) == 1 and cleared[0]["step"] == 6 and cleared[0]["seconds"] >= 2.0
    finally:
        other.close()
        watch.close()
    # Written once each, in order, by two threads through one writer.
    kinds = [e["type"] for e in _events(stream) if e["type"] in ("stall", "stall_cleared")]
    assert kinds == ["stall", "stall_cleared"]


def test_who_takes_part():
    ports = free_ports(2)
    assert chief_watch.wanted(_task(0, ports), {})
    assert not chief_watch.wanted(_task(0, ports), {chief_watch.REPORTS_ENV: "0"})
    assert not chief_watch.wanted(Task({"worker": ["127.0.0.1:1"]}, "worker", 0), {})  # alone: nothing to wait for
    assert not chief_watch.wanted(Task({"chief": ["a:1"], "worker": ["b:1"]}, "worker", 0), {})
    # Another run (another config, job or worker list) has another token: its datagrams are dropped.
    assert chief_watch.board_token(_task(0, ports), CONFIG) == chief_watch.board_token(_task(1, ports), CONFIG)
    assert chief_watch.board_token(_task(0, ports), CONFIG) != chief_watch.board_token(_task(0, ports), "{}")


def test_a_taken_port_leaves_the_run_without_a_watch_and_says_so(capsys):
    ports = free_ports(2)
    first = chief_watch.ChiefWatch(_task(0, ports), CONFIG, chief_watch.WatchedEvents("none"), lambda: False)
    try:
        control = argparse.Namespace(paused=False, stop_requested=False)
        assert worker._chief_watch(_task(0, ports), _Config(), chief_watch.WatchedEvents("none"),
                                           control) is None
        assert "no stall watch (the status board's UDP port" in capsys.readouterr().err
    finally:
        first.close()


class _Config:
    def to_json(self) -> str:
        return CONFIG
