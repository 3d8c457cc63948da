"""The bundle's entry point: the ``replica-studio`` command (the app, or the engine when
given a sub-command; the GUI starts engine processes as ``[this executable, train, ...]``)."""
import multiprocessing
import sys

if __name__ == "__main__":
    # Nothing in the app uses multiprocessing, but a library might: with PyInstaller's hook a
    # spawned child then runs its task instead of a second copy of the app.
    multiprocessing.freeze_support()
    from gui_app.app import main

    sys.exit(main())
