"""``python -m gui_app``: the same as the ``replica-studio`` command."""
import sys

from gui_app.app import main

sys.exit(main())
