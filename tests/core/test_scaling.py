"""The scaling report's figures, from event streams shaped like the engine's (core/scaling.py)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from gui_app.core import scaling

CONFIG = {"dataset": {"name": "digits"}, "model": {"name": "mnist_cnn"}, "runtime": {"cpu_devices": 1}}


def _events(replicas: int, step_time: float, compute: float, steps: int = 30, input_wait=None) -> list[dict]:
    events = [{"type": "run_started", "time": 0.0}]
    for s in range(1, steps + 1):
        event = {"type": "step", "time": float(s), "step": s, "step_time": step_time,
                 "replicas": [{"replica": r, "device": f"CPU:{r}", "examples": 32, "step_time": compute * (1 + r / 10)}
                              for r in range(replicas)]}
        if input_wait is not None:
            event["input_wait"] = input_wait
        events.append(event)
    return events


def test_candidates_on_cpus_use_logical_devices_and_on_gpus_the_cards():
    cpu = scaling.candidates(CONFIG, 2, ("one_device", "mirrored", "multi_worker_mirrored"))
    assert [(c.label, c.replicas) for c in cpu] == [("one_device", 1), ("mirrored, 1 replica", 1),
                                                    ("mirrored, 2 replicas", 2), ("multi-worker, 1 worker", 1),
                                                    ("multi-worker, 2 workers", 2)]
    assert cpu[2].strategy == {"name": "mirrored", "devices": ["CPU:0", "CPU:1"]} and cpu[2].runtime["cpu_devices"] == 2
    gpu = scaling.candidates(CONFIG, 4, ("mirrored",), gpus=2)  # never more replicas than cards
    assert [c.strategy["devices"] for c in gpu] == [["GPU:0"], ["GPU:0", "GPU:1"]]
    with pytest.raises(ValueError, match="unknown strategy 'mirroed'"):
        scaling.candidates(CONFIG, 2, ("mirroed",))


def test_burst_figures_exclude_the_warm_up_and_split_the_step():
    figures = scaling.burst_figures(_events(2, step_time=0.1, compute=0.05, input_wait=0.01), warmup_steps=10)
    assert figures["steps"] == 20
    assert figures["examples_per_sec"] == pytest.approx(64 / 0.1)
    assert figures["compute_s"] == pytest.approx(0.055)  # the slowest replica: the all-reduce waits for it
    assert figures["input_s"] == pytest.approx(0.01) and figures["other_s"] == pytest.approx(0.035)
    with pytest.raises(ValueError, match="before its timed part"):
        scaling.burst_figures(_events(1, 0.1, 0.05, steps=5), warmup_steps=10)


def test_report_speedup_efficiency_and_recommendation():
    plan = scaling.candidates(CONFIG, 2, ("mirrored",))
    bursts = []
    for candidate, step_time in zip(plan, (0.10, 0.08)):
        burst = scaling.Burst(candidate)
        figures = scaling.burst_figures(_events(candidate.replicas, step_time, 0.03), 5)
        burst.examples_per_sec, burst.compute_s, burst.other_s = (figures["examples_per_sec"], figures["compute_s"],
                                                                  figures["other_s"])
        bursts.append(burst)
    bursts.append(scaling.Burst(scaling.Candidate("parameter servers", {"name": "parameter_server"}, {}, 2),
                                error="strategy.name: unknown"))
    data = scaling.report(bursts, on_gpus=False)
    one, two, failed = data["rows"]
    assert one["speedup"] == pytest.approx(1.0) and two["speedup"] == pytest.approx(2 * 0.10 / 0.08)
    assert two["efficiency"] == pytest.approx(two["speedup"] / 2)
    assert failed["error"] == "strategy.name: unknown" and failed["speedup"] is None
    assert data["recommendation"].startswith("Fastest here: mirrored, 2 replicas")
    assert "share its cores" in data["recommendation"]
    assert "share its cores" not in scaling.report(bursts, on_gpus=True)["recommendation"]
    svg = ET.fromstring(scaling.to_svg(data))
    assert len(svg.findall("{http://www.w3.org/2000/svg}circle")) == 2
    assert scaling.to_json(data).startswith("{")
