"""GPU sampling through NVML, against a fake ``pynvml`` that keeps the real module's contract
(handles, c-struct-like results, power in milliwatts, NVMLError subclasses for unsupported
queries and a missing driver). No GPU has run this code here."""
from __future__ import annotations

import threading
import types

import pytest

from gui_app.core.gpu_monitor import GpuMonitor, read_gpus


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801 - pynvml's name
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's name
    pass


def fake_nvml(cards: list[dict], driver: bool = True):
    state = {"initialised": 0, "samples": 0}
    tick = threading.Event()

    def init():
        if not driver:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
        state["initialised"] += 1

    def shutdown():
        state["initialised"] -= 1

    def handle(i):
        return cards[i]

    def unsupported_unless(key):
        def query(card, *args):
            if key not in card:
                raise NVMLError_NotSupported("Not Supported")
            if key == "util":
                state["samples"] += 1
                tick.set()
                return types.SimpleNamespace(gpu=card["util"], memory=10)
            if key == "mem":
                used, total = card["mem"]
                return types.SimpleNamespace(used=used, total=total, free=total - used)
            return card[key]
        return query

    module = types.SimpleNamespace(
        NVMLError=NVMLError, NVML_TEMPERATURE_GPU=0, nvmlInit=init, nvmlShutdown=shutdown,
        nvmlDeviceGetCount=lambda: len(cards), nvmlDeviceGetHandleByIndex=handle,
        nvmlDeviceGetName=lambda card: card["name"].encode(),  # bytes, as older drivers return
        nvmlDeviceGetUtilizationRates=unsupported_unless("util"),
        nvmlDeviceGetMemoryInfo=unsupported_unless("mem"),
        nvmlDeviceGetTemperature=unsupported_unless("temp"),
        nvmlDeviceGetPowerUsage=unsupported_unless("mw"))
    return module, state, tick


CARDS = [{"name": "NVIDIA A100-SXM4-40GB", "util": 87, "mem": (30 * 2**30, 40 * 2**30), "temp": 64, "mw": 251_500},
         {"name": "NVIDIA GeForce RTX 3060", "util": 3, "mem": (2**29, 12 * 2**30), "temp": 41}]  # no power


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
