"""``sweep`` for the UI tests' fake engine (tests/ui/fake_engine.py): ``status`` and ``stop`` are the
real engine's (over a real sweep folder, see sweep_dirs.py); a new sweep makes its real folder and
study and prints the folder as ``sweep --detach`` does, but runs no trial (no TensorFlow);
``resume --detach`` prints the folder. Every command is appended to ``$FAKE_SWEEP_LOG`` when set."""
from __future__ import annotations

import json
import os
from pathlib import Path


def sweep(argv: list[str]) -> int:
    log = os.environ.get("FAKE_SWEEP_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(argv) + "\n")
    action = argv[1]
    if action in ("status", "stop"):
        from gui_app.engine.commands.cli import main as engine_main

        return engine_main(argv)
    if action == "resume":
        print(argv[2], flush=True)
        return 0
    from gui_app.core.sweep_config import SweepConfig
    from gui_app.engine.sweep import study as studies
    from gui_app.engine.sweep.folder import SweepFolder

    path = Path(action)
    config = SweepConfig.load(path)
    folder = SweepFolder.create(Path(argv[argv.index("--sweeps-dir") + 1]), path.stem, config, None)
    info = folder.study()
    studies.load(config, info["storage"], info["study_name"], create=True)
    print(folder.path, flush=True)
    return 0
