"""Two logical CPU devices for the tests that run TensorFlow in the test process.

TensorFlow fixes its logical devices when its runtime starts; tests/core and tests/engine
call :func:`configure_test_runtime` from a session fixture before their first test
(MirroredStrategy over CPU:0 and CPU:1, as TensorFlow's and Keras's own tests do), so every
in-process run config uses ``runtime.cpu_devices: 2``.
"""
from __future__ import annotations

TEST_CPU_DEVICES = 2


def configure_test_runtime() -> None:
    from gui_app.core.config import RuntimeConfig
    from gui_app.engine.training.devices import configure_runtime

    configure_runtime(RuntimeConfig(cpu_devices=TEST_CPU_DEVICES))
