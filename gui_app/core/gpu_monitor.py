"""Per-GPU utilisation, memory, temperature and power from NVML (the ``nvidia-ml-py`` package,
module ``pynvml``), sampled on a background thread so a training step never waits on the driver.

TensorFlow reports the memory *it* allocated on a device (``get_memory_info``); NVML reports the
whole card: how busy it is, all memory in use (other processes included), how hot it runs and
what it draws. Without an NVIDIA driver (this project's CI machines, every CPU-only machine)
:func:`read_gpus` returns ``None`` and nothing samples. The sampling code is tested against a
fake NVML that keeps the real module's contract; it has not run on a real GPU here.

Qt-free and TensorFlow-free: the engine samples, the window only shows what events carry.
"""
from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_INTERVAL_S = 1.0


@dataclass(frozen=True)
class GpuSample:
    index: int
    name: str
    utilization: float | None  # percent of the last sample period a kernel ran
    memory_used: int | None  # bytes, every process on the card
    memory_total: int | None
    temperature: float | None  # degrees Celsius
    power: float | None  # watts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _nvml():
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def _query(nvml, call, *args):
    """One NVML query; None where the card or driver does not support it (an NVMLError such
    as NVML_ERROR_NOT_SUPPORTED: consumer cards report no power, some no utilisation)."""
    try:
        return call(*args)
    except nvml.NVMLError:
        return None


def _sample(nvml, index: int) -> GpuSample:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    name = _query(nvml, nvml.nvmlDeviceGetName, handle)
    rates = _query(nvml, nvml.nvmlDeviceGetUtilizationRates, handle)
    memory = _query(nvml, nvml.nvmlDeviceGetMemoryInfo, handle)
    temperature = _query(nvml, nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
    milliwatts = _query(nvml, nvml.nvmlDeviceGetPowerUsage, handle)
    return GpuSample(
        index=index,
        name=name.decode() if isinstance(name, bytes) else str(name or f"GPU {index}"),
        utilization=None if rates is None else float(rates.gpu),
        memory_used=None if memory is None else int(memory.used),
        memory_total=None if memory is None else int(memory.total),
        temperature=None if temperature is None else float(temperature),
        power=None if milliwatts is None else milliwatts / 1000.0,
    )


def read_gpus(nvml=None) -> list[GpuSample] | None:
    """One sample of every NVIDIA GPU; None when NVML is not installed or finds no driver."""
    nvml = nvml or _nvml()
    if nvml is None:
        return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return None
    try:
        return [_sample(nvml, i) for i in range(nvml.nvmlDeviceGetCount())]
    except nvml.NVMLError:
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


class GpuMonitor:
    """Samples every ``interval_s`` on a daemon thread; :meth:`latest` is the newest sample as
    plain dicts (for the ``step`` events), or ``[]`` when there is nothing to sample."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, nvml=None) -> None:
        self._nvml = nvml or _nvml()
        self._interval = interval_s
        self._latest: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start sampling; False (and no thread) when NVML is unavailable or sees no GPU."""
        nvml = self._nvml
        if nvml is None:
            return False
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError:
            return False
        if count == 0:
            nvml.nvmlShutdown()
            return False
        self._take(count)
        self._thread = threading.Thread(target=self._run, args=(count,), name="gpu-monitor", daemon=True)
        self._thread.start()
        return True

    def latest(self) -> list[dict[str, Any]]:
        return self._latest  # replaced whole by the sampler, so a reader never sees half a sample

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self._interval + 1)
            self._thread = None
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass

    def _take(self, count: int) -> None:
        try:
            self._latest = [_sample(self._nvml, i).to_dict() for i in range(count)]
        except self._nvml.NVMLError:  # the driver went away (a reset): keep the last sample
            pass

    def _run(self, count: int) -> None:
        while not self._stop.wait(self._interval):
            self._take(count)
