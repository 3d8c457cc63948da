"""``replica-studio bundle``: a run as one zip with a manifest of SHA-256 sums (gui_app/core/bundle.py).
Round trips byte for byte; a changed byte, a truncated file, a member the manifest does not
list, and hostile zips (``../``, absolute paths, links) are refused with one line naming the
member, and nothing is written outside the folder it is opened into."""
from __future__ import annotations

import json
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest
from report_runs import TEST_ACCURACY, write_run

from gui_app.core.bundle import MANIFEST, BundleError, is_bundle, open_bundle, write_bundle
from gui_app.identity import app_command, app_env


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def run(tmp_path) -> Path:
    run = write_run(tmp_path / "runs" / "run-a")
    (run / "model.keras").write_bytes(b"model bytes" * 100)
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "ckpt-1.index").write_bytes(b"\x00\x01index")
    (run / "tensorboard" / "train").mkdir(parents=True)
    (run / "tensorboard" / "train" / "events.out.tfevents.1").write_bytes(bytes(range(256)) * 10)
    (run / ".lock").write_text("")
    (run / "summary.json").write_text("{}")
    (run / "link.json").symlink_to("/etc/hostname")
    return run


def test_a_bundle_round_trips_byte_for_byte(run, tmp_path):
    bundle = write_bundle(run, with_model=True, with_checkpoints=True)
    assert bundle == run.with_name("run-a.zip") and is_bundle(bundle)
    opened = open_bundle(bundle, tmp_path / "open")
    assert opened == tmp_path / "open" / "run-a"
    expected = {k: v for k, v in _files(run).items() if k not in (".lock", "summary.json", "link.json")}
    assert _files(opened) == expected
    manifest = json.loads(zipfile.ZipFile(bundle).read(MANIFEST))
    assert set(manifest["files"]) == set(expected)


def test_the_model_and_checkpoints_only_when_asked(run, tmp_path):
    names = set(zipfile.ZipFile(write_bundle(run, tmp_path / "b.zip")).namelist())
    assert "events.jsonl" in names and "tensorboard/train/events.out.tfevents.1" in names
    assert "model.keras" not in names and not any(n.startswith("checkpoints/") for n in names)


def _rewrite(bundle: Path, out: Path, change) -> Path:
    """A copy of ``bundle`` with ``change(name, data) -> (name, data) | None`` applied to each member."""
    with zipfile.ZipFile(bundle) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            changed = change(info.filename, src.read(info))
            if changed is not None:
                dst.writestr(changed[0], changed[1])
    return out


def test_a_changed_byte_is_refused_naming_the_member(run, tmp_path):
    bundle = write_bundle(run, tmp_path / "b.zip")
    bad = _rewrite(bundle, tmp_path / "bad.zip",
                   lambda name, data: (name, data.replace(b"mnist_cnn", b"mnist_cnM")) if name == "events.jsonl"
                   else (name, data))
    with pytest.raises(BundleError, match="member 'events.jsonl' does not match its manifest"):
        open_bundle(bad, tmp_path / "open")
    assert not list((tmp_path / "open").rglob("*.jsonl"))  # nothing of it left
    # A byte changed in the stored bytes themselves (the zip's CRC catches it): refused too.
    raw = bytearray((tmp_path / "b.zip").read_bytes())
    at = raw.index(b"events.jsonl") + 200  # inside the compressed events
    raw[at] ^= 0xFF
    (tmp_path / "flipped.zip").write_bytes(bytes(raw))
    with pytest.raises(BundleError, match="member 'events.jsonl'"):
        open_bundle(tmp_path / "flipped.zip", tmp_path / "open2")


def test_a_truncated_bundle_is_refused(run, tmp_path):
    data = write_bundle(run, tmp_path / "b.zip").read_bytes()
    (tmp_path / "cut.zip").write_bytes(data[: len(data) // 2])
    with pytest.raises(BundleError, match="not a run bundle, or truncated"):
        open_bundle(tmp_path / "cut.zip", tmp_path / "open")


@pytest.mark.parametrize("name", ["../escaped.txt", "/tmp/escaped.txt", "a/../../escaped.txt", "..\\escaped.txt"])
def test_a_member_outside_the_folder_is_refused(run, tmp_path, name):
    bundle = write_bundle(run, tmp_path / "b.zip")
    hostile = _rewrite(bundle, tmp_path / "hostile.zip", lambda n, d: (n, d))
    with zipfile.ZipFile(hostile, "a") as zf:
        zf.writestr(name, b"owned")
    with pytest.raises(BundleError, match="would be written outside"):
        open_bundle(hostile, tmp_path / "open" / "deep")
    assert not list(tmp_path.rglob("escaped.txt")) and not Path("/tmp/escaped.txt").exists()


def test_a_link_and_an_unlisted_member_are_refused(run, tmp_path):
    bundle = write_bundle(run, tmp_path / "b.zip")
    linked = _rewrite(bundle, tmp_path / "link.zip", lambda n, d: (n, d))
    with zipfile.ZipFile(linked, "a") as zf:
        info = zipfile.ZipInfo("config-link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(BundleError, match="'config-link' is a link"):
        open_bundle(linked, tmp_path / "open")
    extra = _rewrite(bundle, tmp_path / "extra.zip", lambda n, d: (n, d))
    with zipfile.ZipFile(extra, "a") as zf:
        zf.writestr("notes.txt", b"unlisted")
    with pytest.raises(BundleError, match="'notes.txt' is not in its manifest"):
        open_bundle(extra, tmp_path / "open")
    missing = _rewrite(bundle, tmp_path / "missing.zip", lambda n, d: None if n == "eval.json" else (n, d))
    with pytest.raises(BundleError, match="'eval.json' of its manifest is missing"):
        open_bundle(missing, tmp_path / "open")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(app_command(*args), env=app_env(), capture_output=True, text=True, timeout=120)


def test_the_commands_bundle_and_report_a_bundle(run, tmp_path):
    made = _cli("bundle", str(run), "-o", str(tmp_path / "shared.zip"))
    assert made.returncode == 0 and made.stdout.startswith(f"{tmp_path / 'shared.zip'}: "), made.stderr
    reported = _cli("report", str(tmp_path / "shared.zip"))
    assert reported.returncode == 0, reported.stderr
    html = (tmp_path / "shared.html").read_text(encoding="utf-8")
    assert f"{TEST_ACCURACY:.2%}" in html and "run-a" in html
    (tmp_path / "bad.zip").write_bytes((tmp_path / "shared.zip").read_bytes()[:300])
    for args in (("report", str(tmp_path / "bad.zip")), ("bundle", str(tmp_path)),
                 ("bundle", str(run), "-o", str(tmp_path)), ("bundle", str(run), "--with-model", "-o",
                                                            str(tmp_path / "x.zip"))):
        if args[-1].endswith("x.zip"):
            (run / "model.keras").unlink()
        proc = _cli(*args)
        lines = proc.stderr.splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"replica-studio {args[0]}: "), \
            (args, proc.stderr)


def test_compare_reads_a_bundle_beside_a_run_folder(run, tmp_path):
    other = write_run(tmp_path / "runs" / "run-b", steps=20)
    bundle = write_bundle(other, tmp_path / "b.zip")
    proc = _cli("compare", str(run), str(bundle), "--json", "--no-group")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    assert sorted(name for row in rows for name in row["names"]) == ["run-a", "run-b"]
    assert str(bundle) in [path for row in rows for path in row["run_dirs"]]  # not its temporary copy
    (tmp_path / "cut.zip").write_bytes(bundle.read_bytes()[:200])
    refused = _cli("compare", str(run), str(tmp_path / "cut.zip"))
    assert refused.returncode == 2 and refused.stderr.startswith("replica-studio compare: ") \
        and "truncated" in refused.stderr and len(refused.stderr.splitlines()) == 1


@pytest.mark.slow
def test_export_reads_a_bundle_with_its_model(trained_run, tmp_path):
    """The real engine's run, bundled with its model, mailed, exported from the bundle."""
    bundle = write_bundle(trained_run, tmp_path / "mailed.zip", with_model=True)
    proc = _cli("export", str(bundle), "--format", "keras", "--output", str(tmp_path / "m.keras"), "--check", "32")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "m.keras").is_file() and "top-1 agreement 100.00%" in proc.stdout
    assert not list(Path(tmp_path).glob("replica-studio-bundle-*"))
    without = write_bundle(trained_run, tmp_path / "no-model.zip")
    refused = _cli("export", str(without), "--format", "keras", "--output", str(tmp_path / "n.keras"))
    assert refused.returncode == 2, refused.stderr


def test_evaluate_and_resume_refuse_a_bundle_without_what_they_need(run, tmp_path):
    """One line, exit 2, before any byte is copied or TensorFlow loaded."""
    bare = write_bundle(run, tmp_path / "bare.zip")
    refused = _cli("evaluate", str(bare))
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        f"replica-studio evaluate: {bare} holds no model to evaluate: bundle the run with --with-model"]
    refused = _cli("resume", str(bare), "--runs-dir", str(tmp_path / "runs2"))
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        f"replica-studio resume: {bare} holds no checkpoints to resume from: bundle the run with --with-checkpoints"]
    # Its checkpoints are inside, but the run completed: nothing to resume, no run folder left.
    full = write_bundle(run, tmp_path / "full.zip", with_model=True, with_checkpoints=True)
    refused = _cli("resume", str(full), "--runs-dir", str(tmp_path / "runs2"))
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        f"replica-studio resume: {full}: its run has already completed; nothing to resume"]
    assert not list((tmp_path / "runs2").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bare.zip", "full.zip", "runs", "runs2"]


def test_evaluate_refuses_a_tampered_bundle_and_a_taken_folder(run, tmp_path):
    full = write_bundle(run, tmp_path / "full.zip", with_model=True)
    bad = _rewrite(full, tmp_path / "bad.zip",
                   lambda name, data: (name, data[:-1] + b"!") if name == "model.keras" else (name, data))
    refused = _cli("evaluate", str(bad))
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        f"replica-studio evaluate: {bad}: member 'model.keras' does not match its manifest (SHA-256 or size)"]
    assert not (tmp_path / "bad-evaluation").exists()  # nothing half-extracted left beside it
    (tmp_path / "taken").mkdir()
    refused = _cli("evaluate", str(full), "-o", str(tmp_path / "taken"))
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        f"replica-studio evaluate: {tmp_path / 'taken'} exists already; name a new folder"]
    assert not list((tmp_path / "taken").iterdir())
    # A run folder is evaluated and resumed where it is: the options that place a copy are refused.
    refused = _cli("evaluate", str(run), "-o", str(tmp_path / "elsewhere"), "--events", "none")
    assert refused.returncode == 2 and refused.stderr.splitlines()[-1].startswith("replica-studio evaluate: -o: ")
    assert not (tmp_path / "elsewhere").exists()
    refused = _cli("resume", str(run / "config.json"))  # a file that is no bundle
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        f"replica-studio resume: run_dir: {run / 'config.json'} is not a run directory, nor a run bundle (a zip)"]
