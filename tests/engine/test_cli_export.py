"""``replica-studio export`` and ``predict``: what they print and their exit codes."""
from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
from pathlib import Path

import pytest
from reference_run import write_test_pngs

from gui_app.engine.commands import export, predict
from gui_app.engine.export import FORMATS, read_card
from gui_app.engine.export import exporter as exporter_module
from gui_app.identity import app_command, app_env

ROOT = Path(__file__).parents[2]


@pytest.fixture(autouse=True, scope="module")
def _quiet_before_capture():
    """The command line's first call sends ``sys.stderr`` to the real stderr (engine/run/quiet.py:
    TensorFlow's C++ lines are filtered off fd 2), past a ``capsys`` already capturing: done once
    here, before any test's capture, a test run alone sees its errors as in the whole file."""
    from gui_app.engine.run.quiet import silence_tensorflow_logs

    silence_tensorflow_logs()


def cli(*argv: str) -> int:
    """The real command line (gui_app.engine.commands.cli registers export and predict), in-process."""
    from gui_app.engine.commands.cli import main

    return main(list(argv))


def test_the_commands_register_on_any_parser():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    export.add_commands(sub)
    predict.add_commands(sub)
    args = parser.parse_args(["predict", "run", "a.png", "--top", "3"])
    assert args.handler is predict.run and args.top == 3 and not args.serve
    args = parser.parse_args(["predict", "--serve", "run"])
    assert args.serve and args.model == "run" and args.images == []
    assert parser.parse_args(["export", "run", "--format", "onnx", "-o", "m.onnx"]).handler is export.run


def test_export_prints_the_parity_figures_and_writes_file_and_card(trained_run, tmp_path, capsys):
    out = tmp_path / "digits.onnx"
    assert cli("export", str(trained_run), "--format", "onnx", "--output", str(out), "--check", "64") == 0
    stdout = capsys.readouterr().out.splitlines()
    assert stdout[0].startswith(f"{out}: onnx, ") and "written" in stdout[0]
    assert stdout[1] == f"model card: {out}.json"
    assert stdout[2].startswith("parity: 64 test images (onnxruntime): max abs diff ")
    assert stdout[2].endswith("PASS (max abs diff <= 1e-05)")
    assert read_card(out)["parity"]["examples"] == 64


def test_a_run_stopped_before_its_end_exports_its_last_checkpoint(trained_run, tmp_path, capsys):
    import shutil

    stopped = tmp_path / "stopped"
    shutil.copytree(trained_run, stopped, ignore=shutil.ignore_patterns("model.keras"))
    out = tmp_path / "stopped.keras"
    assert cli("export", str(stopped), "--format", "keras", "-o", str(out), "--check", "16") == 0
    stdout = capsys.readouterr().out.splitlines()
    assert stdout[-1].startswith("exported from the checkpoint at step ") and out.is_file()
    assert read_card(out)["weights"].startswith("the checkpoint at step ")
    assert not (stopped / "model.keras").exists()  # the run folder is left as it was


def test_export_json_output(trained_run, tmp_path, capsys):
    out = tmp_path / "digits.keras"
    assert cli("export", str(trained_run), "--format", "keras", "-o", str(out), "--check", "16", "--json") == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {line["type"] for line in lines[:-1]} == {"progress"} and lines[-1]["type"] == "export_result"
    result = lines[-1]
    assert result["passed"] and result["written"] and result["path"] == str(out)
    assert result["parity"]["max_abs_diff"] == 0.0 and result["size_bytes"] == out.stat().st_size


def test_a_failed_check_exits_1_and_writes_nothing(trained_run, tmp_path, capsys, monkeypatch):
    strict = dataclasses.replace(FORMATS["tflite-int8"], min_top1_agreement=1.01)
    monkeypatch.setattr(exporter_module, "get_format", lambda name: strict)
    out = tmp_path / "digits-int8.tflite"
    assert cli("export", str(trained_run), "--format", "tflite-int8", "--output", str(out), "--check", "16") == 1
    captured = capsys.readouterr()
    assert "NOT written" in captured.out and "FAIL (top-1 agreement >= 101%)" in captured.out
    assert captured.err.splitlines()[-1].startswith("replica-studio export: digits-int8.tflite failed its parity check")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    (["--format", "tflite", "--output", "{tmp}/m.onnx"],
     "replica-studio export: output: tflite exports are .tflite files"),
    (["--format", "keras", "--output", "{tmp}/nowhere/m.keras"], "no such folder"),
    (["--format", "keras", "--output", "{tmp}/m.keras", "--check", "-3"], "replica-studio export: check: must be >= 0"),
])
def test_bad_export_input_exits_2_with_one_line(trained_run, tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert cli("export", str(trained_run), *argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_bad_input_from_the_real_command_line_has_no_traceback(tmp_path):
    done = subprocess.run(app_command("export", str(tmp_path / "no-run"), "--format", "onnx",
                                         "--output", str(tmp_path / "m.onnx")),
                          capture_output=True, text=True, cwd=ROOT, env=app_env(), timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == f"replica-studio export: {tmp_path / 'no-run'}: not a run folder (no config.json)"
    assert "tensorflow" not in done.stderr.lower()  # it failed before TensorFlow was imported


@pytest.fixture(scope="module")
def cli_pngs(trained_run, tmp_path_factory):
    paths, _, labels = write_test_pngs(trained_run, tmp_path_factory.mktemp("cli-pngs"), scale=3)
    return paths, labels


def test_predict_prints_top_k(trained_run, cli_pngs, capsys):
    paths, _ = cli_pngs
    assert cli("predict", str(trained_run), *map(str, paths), "--top", "3") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == str(paths[0]) and lines[4] == str(paths[1])
    assert len(lines) == 8 and all(line.endswith("%") for line in lines[1:4])


def test_predict_json(trained_run, cli_pngs, capsys):
    paths, labels = cli_pngs
    assert cli("predict", str(trained_run), *map(str, paths), "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert result["kind"] == "run" and result["class_names"] == [str(i) for i in range(10)]
    for prediction in result["predictions"]:
        assert len(prediction["probabilities"]) == 10
        assert sum(prediction["probabilities"]) == pytest.approx(1.0, abs=1e-5)
        assert len(prediction["top"]) == 5
    assert [p["top"][0]["class"] for p in result["predictions"]] == labels.tolist()


def test_predict_bad_input_exits_2(trained_run, cli_pngs, tmp_path, capsys):
    assert cli("predict", str(trained_run), str(tmp_path / "missing.png")) == 2
    assert capsys.readouterr().err.strip() == f"replica-studio predict: {tmp_path / 'missing.png'}: no such image file"
    assert cli("predict", str(tmp_path), str(cli_pngs[0][0])) == 2
    assert "neither a run folder nor a SavedModel folder" in capsys.readouterr().err


def test_an_unexpected_error_is_one_line_without_traceback(trained_run, tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'tf2onnx.tfonnx'")

    monkeypatch.setattr("gui_app.engine.export.export_run", broken)
    assert cli("export", str(trained_run), "--format", "onnx", "--output", str(tmp_path / "m.onnx")) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "replica-studio export: internal error: ModuleNotFoundError: No module named 'tf2onnx.tfonnx' "
        "(run again with --debug for the traceback)"]
