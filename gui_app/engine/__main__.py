"""``python -m gui_app.engine SUBCOMMAND ...``: the engine's command line."""
import sys

from gui_app.engine.commands.cli import main
from gui_app.engine.run.exits import RUN_COMMANDS, exit_now

code = main()
if len(sys.argv) > 1 and sys.argv[1] in RUN_COMMANDS:
    exit_now(code)
sys.exit(code)
