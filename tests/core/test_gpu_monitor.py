"""GPU sampling through NVML, against a fake ``pynvml`` that keeps the real module's contract
(handles, c-struct-like results, power in milliwatts, NVMLError subclasses for unsupported
queries and a missing driver). No GPU has run this code here."""
from __future__ import annotations

import pytest
from fake_nvml import CARDS, fake_nvml

from gui_app.core.gpu_monitor import GpuMonitor, read_gpus


def test_one_reading_per_card_with_units_and_unsupported_fields_as_none():
    nvml, state, _ = fake_nvml(CARDS)
    first, second = read_gpus(nvml)
    assert first.to_dict() == {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "utilization": 87.0,
                               "memory_used": 30 * 2**30, "memory_total": 40 * 2**30, "temperature": 64.0,
                               "power": 251.5}
    assert second.name == "NVIDIA GeForce RTX 3060" and second.power is None
    assert state["initialised"] == 0  # every nvmlInit is paired with an nvmlShutdown


def test_no_driver_means_no_reading_and_no_thread():
    nvml, _, _ = fake_nvml(CARDS, driver=False)
    assert read_gpus(nvml) is None
    monitor = GpuMonitor(nvml=nvml)
    assert monitor.start() is False and monitor.latest() == []
    monitor.stop()


def test_the_monitor_samples_in_the_background_until_stopped():
    nvml, state, tick = fake_nvml(CARDS)
    monitor = GpuMonitor(interval_s=0.01, nvml=nvml)
    assert monitor.start()
    assert [g["utilization"] for g in monitor.latest()] == [87.0, 3.0]  # the first sample is taken at once
    CARDS[0]["util"] = 12
    try:
        for _ in range(50):
            tick.clear()
            assert tick.wait(2)
            if monitor.latest()[0]["utilization"] == 12.0:
                break
        assert monitor.latest()[0]["utilization"] == 12.0
    finally:
        CARDS[0]["util"] = 87
        monitor.stop()
    assert state["initialised"] == 0
    tick.clear()
    assert not tick.wait(0.1)  # ten sample periods: the thread has ended


@pytest.mark.skipif(read_gpus() is not None, reason="this machine has an NVIDIA driver")
def test_the_real_module_on_a_machine_without_a_driver_reports_none():
    assert read_gpus() is None
