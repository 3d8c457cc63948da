"""The real engine with a fake NVML, for the window's end-to-end GPU test:
``python tests/ui/nvml_engine.py train CONFIG --events jsonl ...`` (any engine command).

``sys.modules["pynvml"]`` is the fake of tests/fake_nvml.py, so gui_app.core.gpu_monitor
imports it as it would import nvidia-ml-py and samples it on its own thread. The runner starts
its monitor only when a replica is on a GPU, and this machine has none: the one change here is
a monitor that starts when it is made (sampling every 0.2 s, so a short run gets several).
Everything else -- the training, the events, the run directory -- is the engine's own.
"""
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for fake_nvml
    from fake_nvml import CARDS, fake_nvml

    sys.modules["pynvml"] = fake_nvml(CARDS)[0]  # before anything imports gui_app.core.gpu_monitor's NVML

    from gui_app.core.gpu_monitor import GpuMonitor
    from gui_app.engine.commands.cli import main as engine_main
    from gui_app.engine.run.exits import RUN_COMMANDS, exit_now
    from gui_app.engine.training import controller

    class StartedMonitor(GpuMonitor):
        def __init__(self) -> None:
            super().__init__(interval_s=0.2)
            self.start()

    controller.GpuMonitor = StartedMonitor
    code = engine_main(argv)
    if argv and argv[0] in RUN_COMMANDS:
        exit_now(code)  # as python -m gui_app.engine does: skip TensorFlow's teardown
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
