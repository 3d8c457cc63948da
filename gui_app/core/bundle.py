"""A run as one file (``replica-studio bundle``): a zip of the run's record -- config, events,
evaluation, misclassified images, the exports' model cards, the engine log, the TensorBoard
files, the model and checkpoints when asked -- and ``manifest.json``, the SHA-256 and size of
every member. Opening one (:func:`open_bundle`) checks it whole before anything is used: a member
whose bytes differ from the manifest, a member the manifest does not list (or one it lists that
is missing), a truncated or damaged zip, a path that would land outside the folder it is
extracted to (``../``, an absolute path) and a link are each refused with one line naming the
member. Nothing is written outside the folder given. Qt-free and TensorFlow-free.
"""
from __future__ import annotations

import hashlib
import json
import stat
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from gui_app.core import atomic_io, rundir

MANIFEST = "manifest.json"
FORMAT = "replica-studio-bundle"
VERSION = 1
SUFFIX = ".zip"
# What a bundle never holds: the run's process state (lock, control channel, the process records
# of the run and of a cluster's workers, the run list's cache, the history's pyramid: caches
# rebuilt from the events, keyed to the events file's inode), a training cache of the dataset
# (data/), and a report written before.
_NEVER = {".lock", ".control", "process.json", "workers.json", rundir.SUMMARY_FILE, rundir.HISTORY_DIR, "data",
          "report.html"}
_CHUNK = 1 << 20


class BundleError(ValueError):
    """A bundle that cannot be opened or written; the message is one line naming the member."""


def _members(run_dir: Path, with_model: bool, with_checkpoints: bool) -> Iterator[Path]:
    """The run's files to bundle, relative to it, in name order; links are not followed."""
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir)
        top = rel.parts[0]
        if top in _NEVER or path.is_symlink() or not path.is_file() or rel.as_posix() == MANIFEST:
            continue
        if top == rundir.CHECKPOINT_DIR and not with_checkpoints:
            continue
        if top == rundir.MODEL_FILE and not with_model:
            continue
        if any(part.startswith(".") for part in rel.parts):  # temporaries of atomic writes
            continue
        yield rel


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_bundle(run_dir: str | Path, output: str | Path | None = None, *, with_model: bool = False,
                 with_checkpoints: bool = False) -> Path:
    """Write the bundle of ``run_dir`` (default: ``RUN_DIR.zip`` beside the folder); where it went."""
    run_dir = Path(run_dir).expanduser()
    if not rundir.is_run_dir(run_dir):
        raise BundleError(f"{run_dir}: not a run directory (no {rundir.CONFIG_FILE})")
    if with_model and not (run_dir / rundir.MODEL_FILE).is_file():
        raise BundleError(f"--with-model: {run_dir} has no {rundir.MODEL_FILE} "
                          "(a run stopped early has its checkpoints: --with-checkpoints)")
    target = Path(output).expanduser() if output else run_dir.with_name(run_dir.name + SUFFIX)
    if target.is_dir():
        raise BundleError(f"{target} is a folder; name the bundle file to write")
    members = list(_members(run_dir, with_model, with_checkpoints))
    manifest: dict[str, Any] = {"format": FORMAT, "version": VERSION, "run": run_dir.name,
                                "files": {rel.as_posix(): {"sha256": _sha256(run_dir / rel),
                                                           "size": (run_dir / rel).stat().st_size}
                                          for rel in members}}
    try:
        with atomic_io.atomic_path(target, durable=False) as tmp, \
                zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            zf.writestr(MANIFEST, json.dumps(manifest, indent=1))
            for rel in members:
                zf.write(run_dir / rel, rel.as_posix())
    except OSError as exc:
        raise BundleError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


def is_bundle(path: str | Path) -> bool:
    """A file that is a zip with a bundle's manifest (looked at, not verified)."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as zf:
            return MANIFEST in zf.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


def _safe_name(info: zipfile.ZipInfo) -> str:
    """The member's path if it stays inside the folder and is a plain file; BundleError otherwise."""
    name = info.filename
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise BundleError(f"member {name!r} is a link; a bundle holds plain files only")
    pure = PurePosixPath(name)
    if (not name or "\\" in name or pure.is_absolute() or ".." in pure.parts or name.startswith("/")
            or (len(name) > 1 and name[1] == ":")):
        raise BundleError(f"member {name!r} would be written outside the bundle's folder")
    return name


def read_manifest(zf: zipfile.ZipFile, where: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(zf.read(MANIFEST))
    except KeyError:
        raise BundleError(f"{where}: not a run bundle (no {MANIFEST})") from None
    except (ValueError, zipfile.BadZipFile, OSError) as exc:
        raise BundleError(f"{where}: {MANIFEST} cannot be read ({exc})") from None
    if not (isinstance(manifest, dict) and manifest.get("format") == FORMAT
            and isinstance(manifest.get("files"), dict)):
        raise BundleError(f"{where}: {MANIFEST} is not a run bundle's manifest")
    if not isinstance(manifest.get("run"), str) or not manifest["run"] or "/" in manifest["run"] \
            or manifest["run"] in (".", ".."):
        raise BundleError(f"{where}: {MANIFEST} names no usable run folder")
    return manifest


def _open_zip(bundle: Path) -> zipfile.ZipFile:
    if not bundle.is_file():
        raise BundleError(f"{bundle}: no such file")
    try:
        return zipfile.ZipFile(bundle)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BundleError(f"{bundle}: not a run bundle, or truncated ({exc})") from None


def bundle_holds(bundle: str | Path) -> tuple[bool, bool]:
    """Whether ``bundle`` holds the trained model and checkpoints, as its manifest says (read,
    not verified: opening it checks every byte). BundleError when it is not a bundle."""
    bundle = Path(bundle).expanduser()
    with _open_zip(bundle) as zf:
        files = read_manifest(zf, bundle)["files"]
    return rundir.MODEL_FILE in files, any(name.startswith(rundir.CHECKPOINT_DIR + "/") for name in files)


def open_bundle(bundle: str | Path, into: str | Path, *, name: str | None = None, unique: bool = False) -> Path:
    """Check ``bundle`` whole and extract it to ``into/<name>`` (default: the run's name; with
    ``unique``, ``name-1``, ``name-2``... when taken, as run folders are named); the run folder,
    which must not exist yet. BundleError (one line) for a file that is not a bundle, is truncated
    or damaged, or does not match its manifest; nothing is left in ``into`` then."""
    bundle, into = Path(bundle).expanduser(), Path(into)
    with _open_zip(bundle) as zf:
        manifest = read_manifest(zf, bundle)
        listed: dict[str, Any] = manifest["files"]
        infos = [info for info in zf.infolist() if info.filename != MANIFEST]
        names = [_safe_name(info) for info in infos]
        if len(set(names)) != len(names):
            twice = next(member for member in names if names.count(member) > 1)
            raise BundleError(f"{bundle}: member {twice!r} is in it twice")
        for member in names:
            if member not in listed:
                raise BundleError(f"{bundle}: member {member!r} is not in its manifest")
        for member in listed:
            if member not in names:
                raise BundleError(f"{bundle}: member {member!r} of its manifest is missing")
        stem = name or manifest["run"]
        if unique:
            folder = rundir.new_folder(into, stem, "a run directory")
        else:
            folder = into / stem
            try:
                folder.mkdir(parents=True)
            except FileExistsError:
                raise BundleError(f"{folder} exists already; name a new folder") from None
        try:
            for info, member in zip(infos, names):
                _extract(zf, info, folder / member, listed[member], bundle)
        except BaseException:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
            raise
    return folder


def _extract(zf: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path, expected: Any, bundle: Path) -> None:
    """One member to ``dest``, hashed as it is written; BundleError naming it when it differs."""
    if info.is_dir():
        return
    if not isinstance(expected, dict):
        raise BundleError(f"{bundle}: member {info.filename!r}: its manifest entry is not readable")
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    try:
        with zf.open(info) as src, dest.open("xb") as out:
            for chunk in iter(lambda: src.read(_CHUNK), b""):
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:  # a bad CRC, cut short
        raise BundleError(f"{bundle}: member {info.filename!r} is damaged or truncated ({exc})") from None
    if digest.hexdigest() != expected.get("sha256") or size != expected.get("size"):
        raise BundleError(f"{bundle}: member {info.filename!r} does not match its manifest (SHA-256 or size)")
