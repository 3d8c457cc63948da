"""``replica-studio bundle RUN_DIR [-o FILE] [--with-model] [--with-checkpoints]``: the run as one
file with a manifest of SHA-256 sums (gui_app/core/bundle.py), written to ``RUN_DIR.zip`` beside
the folder unless ``-o`` names the file. ``report``, ``compare`` and ``export`` read a bundle where
they read a run folder (:func:`run_folder`: checked whole, extracted into a temporary folder
removed afterwards). ``evaluate`` and ``resume`` write, so for them a bundle is extracted into a
real folder first (:func:`extract_for_command`): the evaluation's own folder beside the bundle
(or ``-o``), the resumed run's new run directory in the runs folder; the bundle is only read.
Bad input: one line on stderr, exit 2."""
from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.bundle import BundleError, bundle_holds, open_bundle, write_bundle
from gui_app.core.formats import format_size
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK

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


def extract_for_command(args: argparse.Namespace) -> int | None:
    """``evaluate BUNDLE`` and ``resume BUNDLE``: check the bundle holds what the command needs
    (its manifest, before any byte is copied), extract it whole into the folder the command
    writes, and point ``args.run_dir`` at it (``args.extracted``: the folder this process made,
    which a failed evaluation or a refused resume removes again). None then; otherwise the one
    line said and the exit code (2)."""
    bundle = Path(args.run_dir).expanduser()
    try:
        if not zipfile.is_zipfile(bundle):  # a config.json given for the run: say what was expected
            raise BundleError(f"run_dir: {bundle} is not a run directory, nor a run bundle (a zip)")
        has_model, has_checkpoints = bundle_holds(bundle)
        if args.command == "evaluate":
            if not (has_model or has_checkpoints):
                raise BundleError(f"{bundle} holds no model to evaluate: bundle the run with --with-model")
            if args.output:  # a new folder the user names; beside the bundle by default
                output = Path(args.output).expanduser().absolute()
                folder = open_bundle(bundle, output.parent, name=output.name)
            else:
                folder = open_bundle(bundle, bundle.parent, name=f"{bundle.stem}-evaluation", unique=True)
        else:
            if not has_checkpoints:
                raise BundleError(f"{bundle} holds no checkpoints to resume from: bundle the run with "
                                  "--with-checkpoints")
            runs_dir = Path(args.runs_dir).expanduser() if args.runs_dir else rundir.default_runs_dir()
            folder = open_bundle(bundle, runs_dir, unique=True)  # a run folder the run list shows
            if rundir.read_run(folder).status == "completed":
                shutil.rmtree(folder, ignore_errors=True)
                raise BundleError(f"{bundle}: its run has already completed; nothing to resume")
    except (OSError, ValueError) as exc:
        print(f"replica-studio {args.command}: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    what = "its evaluation goes to" if args.command == "evaluate" else "its run resumes in"
    print(f"replica-studio {args.command}: {bundle.name} checked; {what} {folder}", file=sys.stderr, flush=True)
    args.run_dir, args.extracted = str(folder), folder
    return None
