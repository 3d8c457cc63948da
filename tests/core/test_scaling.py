"""The scaling report's figures, from event streams shaped like the engine's (core/scaling.py)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from gui_app.core import events as ev
from gui_app.core import scaling

CONFIG = {"dataset": {"name": "digits"}, "model": {"name": "mnist_cnn"}, "runtime": {"cpu_devices": 1}}


def _events(replicas: int, step_time: float, compute: float, steps: int = 30, input_wait=None) -> list[ev.Event]:
    events: list[ev.Event] = [ev.RunStarted(run_dir="", config={})]
    for s in range(1, steps + 1):
        events.append(ev.Step(time=float(s), step=s, step_time=step_time, input_wait=input_wait, replicas=[
            ev.ReplicaStats(replica=r, device=f"CPU:{r}", examples=32, step_time=compute * (1 + r / 10))
            for r in range(replicas)]))
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
    assert data["baseline"] == one["label"]  # the row that is 1.00x, named in the chart's title
    assert scaling.speedup_title(data) == f"Speed-up against {one['label']}"
    assert "share its cores" in data["recommendation"]
    assert "share its cores" not in scaling.report(bursts, on_gpus=True)["recommendation"]
    svg = ET.fromstring(scaling.to_svg(data))
    assert len(svg.findall("{http://www.w3.org/2000/svg}circle")) == 2
    assert scaling.to_json(data).startswith("{")


def _loss_events(replicas: int, step_time: float, loss: float, steps: int = 30) -> list[ev.Event]:
    events = _events(replicas, step_time, step_time / 2, steps)
    for e in events[1:]:
        e.loss = loss + e.step / 1000
    return events


def test_option_candidates_vary_one_setting_from_the_same_seed():
    from gui_app.core import scaling_options

    config = {**CONFIG, "training": {"global_batch_size": 64, "seed": None}}
    plan = scaling_options.option_candidates(config, 2, ("one_device", "mirrored", "multi_worker_mirrored"))
    labels = [c.label for c in plan]
    assert labels == ["mirrored, 2 replicas: baseline", "mirrored, 2 replicas: all-reduce in float16",
                      "mirrored, 2 replicas: accumulate 4 micro-batches",
                      "mirrored, 2 replicas: batch 16, no accumulation (reference)",
                      "multi-worker, 2 workers: baseline", "multi-worker, 2 workers: all-reduce in float16",
                      "multi-worker, 2 workers: bytes_per_pack 64 KiB",
                      "multi-worker, 2 workers: communication ring (baseline: auto)",
                      "multi-worker, 2 workers: accumulate 4 micro-batches",
                      "multi-worker, 2 workers: batch 16, no accumulation (reference)"]
    assert {c.training["seed"] for c in plan} == {1}  # no seed: every burst gets the same one
    assert plan[6].strategy == {"name": "multi_worker_mirrored", "workers": 2, "bytes_per_pack": 65536}
    assert plan[2].training == {"seed": 1, "accumulation_steps": 4} and plan[2].runtime["cpu_devices"] == 2
    # Every option burst is a valid run config (bytes_per_pack only where it acts).
    from gui_app.core.config import RunConfig

    for c in plan:
        RunConfig.from_dict({**config, "strategy": c.strategy, "runtime": c.runtime,
                             "training": {**config["training"], **c.training}})
    assert scaling_options.option_candidates(config, 1, ("mirrored",)) == []  # one replica: nothing to reduce
    small = scaling_options.option_candidates({**CONFIG, "training": {"global_batch_size": 6}}, 2, ("mirrored",))
    assert [c.option for c in small] == ["baseline", "all-reduce in float16"]  # 3 per replica: no room for M=4


def test_option_rows_speed_and_loss_against_the_baseline():
    from gui_app.core import scaling_options

    plan = scaling_options.option_candidates({**CONFIG, "training": {"global_batch_size": 64}}, 2, ("mirrored",))
    speeds = {"baseline": (0.10, 1.0), "all-reduce in float16": (0.125, 1.002),
              "accumulate 4 micro-batches": (0.08, 1.0), "batch 16, no accumulation (reference)": (0.05, 1.5)}
    bursts = []
    for c in plan:
        step_time, loss = speeds[c.option]
        figures = scaling.burst_figures(_loss_events(2, step_time, loss), 10, 25)
        b = scaling.Burst(c, examples_per_sec=figures["examples_per_sec"], steps=figures["steps"],
                          loss=figures["loss"])
        bursts.append(b)
    assert figures["steps"] == 15 and figures["loss"] == pytest.approx(1.5 + 18 / 1000)  # steps 11..25
    data = scaling_options.report([scaling.Burst(scaling.candidates(CONFIG, 1, ("one_device",))[0], 500.0)] + bursts,
                                  on_gpus=False)
    assert data["version"] == 2 and [r["label"] for r in data["rows"]] == ["one_device"]
    rows = {r["option"]: r for r in data["options"]}
    assert rows["baseline"]["speed_vs_baseline"] == pytest.approx(1.0) and rows["baseline"]["loss_vs_baseline"] == 0
    assert rows["all-reduce in float16"]["speed_vs_baseline"] == pytest.approx(0.8)
    assert rows["all-reduce in float16"]["loss_vs_baseline"] == pytest.approx(0.002)
    reference = rows["batch 16, no accumulation (reference)"]
    assert reference["loss_vs_baseline"] is None and not reference["loss_comparable"]
    assert "accumulate 4 micro-batches ran at 1.25x the baseline, training loss +0.00000" in data["recommendation"]
    svg = ET.fromstring(scaling_options.to_svg(data))
    assert len(svg.findall("{http://www.w3.org/2000/svg}rect")) == 1 + 4  # the background and a bar per option
    assert "0.80x loss +0.00200" in scaling_options.to_svg(data)
    assert int(svg.get("height")) > 400


def test_an_option_s_long_error_is_cut_before_it_is_escaped():
    """A failed option's error is shortened to fit its bar: cutting after escaping could split
    an entity (``&am``) and leave an SVG no viewer opens."""
    from gui_app.core.scaling_options import options_svg

    row = {"group": "mirrored, 2 replicas", "option": "baseline", "label": "x", "speed_vs_baseline": None,
           "error": "x" * 58 + "&<b>"}
    parts, _ = options_svg([row], 640, 0)
    text = ET.fromstring("<svg>" + "".join(parts) + "</svg>").findall("text")[-1].text
    assert text == "x" * 58 + "&<"
