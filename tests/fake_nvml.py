"""A fake ``pynvml`` (nvidia-ml-py) that keeps the real module's contract: handles, c-struct-like
results, power in milliwatts, NVMLError subclasses for unsupported queries and a missing driver.
No GPU has run the NVML code here; tests/core/test_gpu_monitor.py tests the sampler against this,
and tests/ui/nvml_engine.py runs the real engine with it."""
from __future__ import annotations

import threading
import types


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
