"""The schedulers' own commands as ``submit`` runs them (``sbatch``, ``kubectl``): found on PATH,
given a time limit, no stdin, and a refusal told as one line -- the command's own last line on
stderr, which is where both say why."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


class SubmitError(Exception):
    """The scheduler's command is missing, did not answer, or refused: one line."""


def find(program: str, hint: str) -> str:
    """``program``'s path on PATH; SubmitError saying ``hint`` (what to install or where to be)."""
    path = shutil.which(program)
    if path is None:
        raise SubmitError(f"{program}: not found on PATH ({hint})")
    return path


def run(program: str, args: list[str], *, hint: str, timeout: float, silent: str, cwd: Path | None = None,
        env: dict[str, str] | None = None) -> str:
    """Run ``program ARGS`` (in ``env``, default ours); its stdout, or SubmitError: missing
    (``hint``), no answer within ``timeout`` seconds (``silent`` says who does not answer), or its
    own last stderr line."""
    command = [find(program, hint), *args]
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired:
        raise SubmitError(f"{program}: no answer within {timeout:.0f} s ({silent})") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        raise SubmitError(said[-1] if said else f"{program} {args[0]}: exit code {done.returncode}")
    return done.stdout
