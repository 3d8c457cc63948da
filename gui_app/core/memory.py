"""The memory budget of ``dataset.loading: auto`` (TensorFlow-free: the dataset form shows it).

A set whose decoded size exceeds the budget streams from its files. The budget is
``dataset.memory_budget_mb``, else ``$REPLICA_STUDIO_MEMORY_BUDGET_MB``, else 25 % of RAM:
training holds the decoded set once, TensorFlow about 0.7 GB, and the window, the batches in
flight and the other programs of the machine need the rest.
"""
from __future__ import annotations

import os

BUDGET_ENV = "REPLICA_STUDIO_MEMORY_BUDGET_MB"
BUDGET_FRACTION = 0.25
_FALLBACK_RAM = 8 * 2**30


def ram_bytes() -> int | None:
    """Physical memory of this machine, or None when it cannot be told."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # not POSIX
        try:
            import psutil

            return int(psutil.virtual_memory().total)
        except ImportError:
            return None


def default_budget_bytes() -> int:
    """The budget when the config names none: the environment variable, else 25 % of RAM."""
    env = os.environ.get(BUDGET_ENV, "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env) * 2**20
    return int((ram_bytes() or _FALLBACK_RAM) * BUDGET_FRACTION)


def budget_bytes(memory_budget_mb: int | None) -> int:
    return memory_budget_mb * 2**20 if memory_budget_mb is not None else default_budget_bytes()


def format_bytes(n: int) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"
