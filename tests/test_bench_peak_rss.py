"""The benchmarks' peak RSS of one process (benchmarks/common.py ``peak_run``) is that process's
own, not the RSS it inherits from a big benchmark at fork (Linux keeps the larger of the two in a
child's ``ru_maxrss``: a plain ``wait4`` of a child of this process reports at least this process)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common

MB = 1024 * 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's ru_maxrss semantics")
def test_peak_run_reports_the_child_alone_not_its_big_parent():
    ballast = bytearray(300 * MB)
    for i in range(0, len(ballast), 4096):  # touched: resident
        ballast[i] = 1
    small = [sys.executable, "-S", "-c", "print('x' * 10)"]
    # The naive reading this replaced: the child's ru_maxrss from this process's own wait4.
    proc = subprocess.Popen(small, stdout=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    assert usage.ru_maxrss * 1024 >= 300 * MB

    seconds, peak, out, _ = common.peak_run(small, dict(os.environ))
    assert out == 11
    assert 1 * MB < peak < 60 * MB
    assert 0 < seconds < 60
    del ballast


def test_peak_run_counts_what_the_child_allocates_and_fails_with_its_stderr():
    grow = [sys.executable, "-S", "-c", "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096])"]
    _, peak, _, _ = common.peak_run(grow, dict(os.environ))
    assert peak >= 200 * MB
    with pytest.raises(RuntimeError, match="failed \\(3\\).*boom"):
        common.peak_run([sys.executable, "-S", "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"],
                        dict(os.environ))
