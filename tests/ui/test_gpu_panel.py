"""The GPU panel of the Replicas tab: NVML samples from step events (the shape
gui_app.core.gpu_monitor produces, here from its reader over the fake NVML), which replica runs
on which GPU, hidden on CPUs, replayed for an opened run, and end to end with the real engine
sampling a fake NVML."""
from __future__ import annotations

import copy
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from fake_nvml import CARDS, fake_nvml
from run_dirs import CONFIG, wait_listed
from synthetic import jsonl, synthetic_events

from gui_app.core import events as ev
from gui_app.core.event_schema import event_problems
from gui_app.core.gpu_monitor import GpuSample, read_gpus
from gui_app.core.history import RunHistory
from gui_app.core.history.gpus import gpu_replicas
from gui_app.ui.charts.plot import HIGHLIGHT_COLOR
from gui_app.ui.tabs.replicas import ReplicasTab

NVML_ENGINE = Path(__file__).with_name("nvml_engine.py")


def samples(cards=CARDS) -> list[GpuSample]:
    """One ``gpus`` list exactly as the runner samples it (read over the fake NVML)."""
    return read_gpus(fake_nvml(cards)[0])


def gpu_run(gpus_by_step: dict[int, list[GpuSample]], devices=("GPU:0", "GPU:1"), workers=None,
            strategy="mirrored") -> list[ev.Event]:
    names = [f"/job:localhost/replica:0/task:0/device:{d}" for d in devices]
    replicas = [ev.ReplicaInfo(replica=i, device=d, worker=workers[i] if workers else 0) for i, d in enumerate(names)]
    events: list[ev.Event] = [ev.RunStarted(run_dir="", config={}, replicas=replicas, num_replicas=len(replicas),
                                            total_steps=10, strategy={"name": strategy})]
    for step, gpus in sorted(gpus_by_step.items()):
        events.append(ev.Step(time=float(step), step=step, gpus=gpus, replicas=[
            ev.ReplicaStats(replica=r.replica, device=r.device, worker=r.worker, loss=1.0, examples_per_sec=100.0)
            for r in replicas]))
    return events


@pytest.fixture
def charts(qtbot):
    charts = ReplicasTab()
    qtbot.addWidget(charts)
    charts.resize(1000, 700)
    charts.show()
    return charts


def shown(charts: ReplicasTab) -> bool:
    charts.gpus.flush()
    return charts.gpus.isVisibleTo(charts)


def test_cpu_runs_show_no_gpu_panel(charts):
    charts.history.add(synthetic_events(steps=50, replicas=2))
    assert not shown(charts) and len(charts.gpus.cards) == 0
    # GPUs whose memory TensorFlow reports, but no NVML (no driver library, nvidia-ml-py missing)
    charts.history.add(synthetic_events(steps=50, replicas=2, gpu=True)[:1] +
                       [dataclasses.replace(e, gpus=None) if isinstance(e, ev.Step) else e
                        for e in synthetic_events(steps=50, gpu=True)[1:]])
    assert not shown(charts)


def test_each_gpu_shows_its_figures_and_its_replica(charts):
    events = gpu_run({1: samples(), 2: samples()})
    assert all(not [p for p in event_problems(ev.encode(e)) if "gpus" in p] for e in events[1:])  # GPU entries
    charts.history.add(events)
    assert shown(charts) and len(charts.gpus.cards) == 2
    first, second = charts.gpus.cards[0].text(), charts.gpus.cards[1].text()
    assert "GPU 0" in first and "NVIDIA A100-SXM4-40GB" in first and "replica 0" in first
    assert "87 % busy" in first and "memory 30.0 / 40.0 GiB (75%)" in first and "64 °C" in first and "252 W" in first
    assert "replica 1" in second and "power: n/a" in second and "3 % busy" in second  # that card reports no power
    assert HIGHLIGHT_COLOR not in first + second  # neither hot nor full


def test_a_hot_or_full_gpu_is_named_and_the_line_follows_the_samples(charts):
    cards = copy.deepcopy(CARDS)
    cards[0].update(temp=91, util=40)
    cards[1].update(mem=(int(11.8 * 2**30), 12 * 2**30))
    charts.history.add(gpu_run({1: samples(), 2: samples(), 3: samples(cards)}))
    assert shown(charts)
    hot, full = charts.gpus.cards[0].text(), charts.gpus.cards[1].text()
    assert "91 °C, hot" in hot and HIGHLIGHT_COLOR in hot and "40 % busy" in hot
    assert "(98%), nearly full" in full and HIGHLIGHT_COLOR in full
    x, y = charts.gpus._curves[0].getData()
    assert list(x) == [1, 2, 3] and list(y) == [87, 87, 40]
    charts.set_history(RunHistory())
    assert not shown(charts) and len(charts.gpus.cards) == 0


def test_replicas_are_placed_on_the_chief_machines_gpus_only():
    device = "/job:worker/replica:0/task:{}/device:GPU:{}".format
    replicas = {0: (device(0, 0), 0), 1: (device(0, 1), 0), 2: (device(1, 0), 1), 3: (device(1, 1), None)}
    assert gpu_replicas(replicas) == {0: [0], 1: [1]}  # worker 1's GPU:0 is another machine's card
    assert gpu_replicas(replicas, "parameter_server") == {}  # the coordinator runs no replica
    assert gpu_replicas({0: ("/job:localhost/replica:0/task:0/device:CPU:0", None)}) == {}


def test_a_multi_worker_run_says_the_figures_are_the_chiefs(charts):
    charts.history.add(gpu_run({1: samples()}, devices=("GPU:0", "GPU:0"), workers=[0, 1],
                               strategy="multi_worker_mirrored"))
    assert shown(charts)
    assert "replica 0" in charts.gpus.cards[0].text() and "no replica of this run" in charts.gpus.cards[1].text()
    assert "only the chief streams events" in charts.gpus.toolTip()


def test_an_opened_run_replays_its_gpu_figures(qtbot, runs_dir, fake_engine):
    from gui_app.ui.window.main_window import MainWindow

    events = synthetic_events(steps=120, replicas=2, gpu=True)
    run = runs_dir / "20261201-120000-digits-mnist_cnn"
    run.mkdir(parents=True)
    CONFIG.save(run / "config.json")
    (run / "events.jsonl").write_text(jsonl(events))
    window = MainWindow(engine_command=fake_engine)
    qtbot.addWidget(window)
    window.show()
    wait_listed(qtbot, window.runs)
    assert window.files.open_run(str(run))
    window.tabs.setCurrentWidget(window.replicas_tab)
    panel = window.replicas_tab.gpus
    qtbot.waitUntil(lambda: len(panel.cards) == 2 and panel.isVisibleTo(window) and bool(panel.cards[1].text()))
    last = [e for e in events if isinstance(e, ev.Step)][-1].gpus
    assert f"{last[0].utilization:.0f} % busy" in panel.cards[0].text() and "replica 1" in panel.cards[1].text()
    assert "nearly full" in panel.cards[1].text()  # the synthetic run's last card is nearly full
    window.files.new_run()  # nothing on screen: the panel goes with the run
    assert not panel.isVisibleTo(window)


@pytest.mark.slow
def test_a_real_engine_run_sampling_a_fake_nvml_shows_the_panel(qtbot, runs_dir):
    from gui_app.core.config import RunConfig, RuntimeConfig, StrategyConfig, TrainingConfig
    from gui_app.ui.window.main_window import MainWindow

    window = MainWindow(engine_command=lambda *args: [sys.executable, str(NVML_ENGINE), *args])
    qtbot.addWidget(window)
    window.show()
    window.config_panel.set_config(RunConfig(strategy=StrategyConfig(name="mirrored", devices=("CPU:0", "CPU:1")),
                                             training=TrainingConfig(epochs=1, global_batch_size=64, steps_per_call=3),
                                             runtime=RuntimeConfig(cpu_devices=2)))
    window.config_panel.inspector.cancel()  # keep the two cores for training
    with qtbot.waitSignal(window.supervisor.finished, timeout=240_000) as finished:
        window.window_actions.train.trigger()
    status, run_dir, message = finished.args
    assert status == "completed", message
    window.tabs.setCurrentWidget(window.replicas_tab)
    panel = window.replicas_tab.gpus
    qtbot.waitUntil(lambda: len(panel.cards) == 2 and panel.isVisibleTo(window) and bool(panel.cards[1].text()))
    assert "NVIDIA A100-SXM4-40GB" in panel.cards[0].text() and "87 % busy" in panel.cards[0].text()
    assert "no replica of this run" in panel.cards[0].text()  # the replicas ran on CPUs
    steps = [json.loads(line) for line in (Path(run_dir) / "events.jsonl").read_text().splitlines()]
    steps = [e for e in steps if e["type"] == "step"]
    assert steps and all(event_problems(e) == [] and len(e["gpus"]) == 2 for e in steps)
    assert np.isclose(steps[-1]["gpus"][0]["power"], 251.5)
    window.supervisor.close()
