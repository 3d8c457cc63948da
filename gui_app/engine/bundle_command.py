"""``replica-studio bundle RUN_DIR [-o FILE] [--with-model] [--with-checkpoints]``: the run as one
file with a manifest of SHA-256 sums (gui_app/core/bundle.py), written to ``RUN_DIR.zip`` beside
the folder unless ``-o`` names the file. ``report``, ``compare`` and ``export`` read a bundle where
they read a run folder (:func:`run_folder`: checked whole, extracted into a temporary folder
removed afterwards). Bad input: one line on
stderr, exit 2."""
from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

from gui_app.core.bundle import open_bundle, write_bundle
from gui_app.core.formats import format_size
from gui_app.engine.exits import EXIT_BAD_INPUT, EXIT_OK

COMMANDS = ("bundle",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("bundle", help="write a run as one file (a zip with a manifest of SHA-256 sums)",
                              description="Write the run's record -- config, events, evaluation, misclassified "
                                          "images, the exports' model cards, the log, the TensorBoard files -- as "
                                          "one zip with a manifest of SHA-256 sums.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder")
    p.add_argument("-o", "--output", metavar="FILE", help="the file to write (default: RUN_DIR.zip beside it)")
    p.add_argument("--with-model", action="store_true", help="also the trained model (model.keras)")
    p.add_argument("--with-checkpoints", action="store_true", help="also the checkpoints (to resume it elsewhere)")
    p.set_defaults(handler=_bundle)


def _bundle(args: argparse.Namespace) -> int:
    try:
        path = write_bundle(args.run_dir, args.output, with_model=args.with_model,
                            with_checkpoints=args.with_checkpoints)
    except (OSError, ValueError) as exc:
        print(f"replica-studio bundle: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    print(f"{path}: {format_size(path.stat().st_size)}", flush=True)
    return EXIT_OK


def run_folder(path: str | Path, stack: contextlib.ExitStack) -> Path:
    """``path`` when it is a folder; a run bundle checked whole and extracted into a temporary
    folder that ``stack`` removes (BundleError, one line, when it does not match its manifest)."""
    path = Path(path).expanduser()
    if not path.is_file():
        return path
    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="replica-studio-bundle-"))
    return open_bundle(path, folder)
