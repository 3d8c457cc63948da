"""``python -m gui_app.engine SUBCOMMAND ...``: the engine's command line."""
import sys

from gui_app.engine.cli import main

sys.exit(main())
