"""``export --json`` and ``predict --serve`` as the window runs them: real processes, JSON lines."""
from __future__ import annotations

import base64
import json
import signal
import subprocess

import numpy as np
from reference_run import write_test_pngs

from gui_app.core.export_result import ExportResult
from gui_app.core.predictions import Prediction
from gui_app.identity import app_command, app_env

TIMEOUT_S = 300


def _popen(*args: str) -> subprocess.Popen:
    return subprocess.Popen(app_command(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=app_env(), bufsize=1)


def test_export_json_is_progress_lines_then_the_result(trained_run, tmp_path):
    out = tmp_path / "digits.tflite"
    done = subprocess.run(app_command("export", str(trained_run), "--format", "tflite", "--output", str(out),
                                      "--check", "32", "--json"),
                          capture_output=True, text=True, env=app_env(), timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]  # every stdout line is JSON
    progress, last = lines[:-1], lines[-1]
    assert progress and all(line["type"] == "progress" and isinstance(line["message"], str) for line in progress)
    fractions = [line["fraction"] for line in progress]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert last["type"] == "export_result"
    result = ExportResult.from_dict(last)
    assert result.passed and result.written and result.path == out and out.is_file()
    assert result.parity.examples == 32 and result.parity.max_abs_diff <= 1e-5
    assert result.size_bytes == out.stat().st_size and result.card_path.is_file()


def test_sigterm_during_an_export_leaves_nothing_behind(trained_run, tmp_path):
    out = tmp_path / "digits-int8-full.tflite"
    process = _popen("export", str(trained_run), "--format", "tflite-int8-full", "--output", str(out), "--json")
    try:
        for line in process.stdout:  # wait until it is writing (temporaries exist, calibration runs)
            event = json.loads(line)
            if event["type"] == "progress" and event["fraction"] >= 0.30:
                break
        assert any(tmp_path.iterdir())  # the hidden temporaries are there now
        process.send_signal(signal.SIGTERM)
        code = process.wait(TIMEOUT_S)
        stderr = process.stderr.read()
    finally:
        process.kill()
    assert code == 130
    assert stderr.strip().splitlines()[-1] == "replica-studio export: interrupted; nothing was written"
    assert list(tmp_path.iterdir()) == []


def test_predict_serve_answers_images_errors_and_test_samples(trained_run, tmp_path):
    paths, images, labels = write_test_pngs(trained_run, tmp_path, count=2)
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    process = _popen("predict", "--serve", str(trained_run), "--top", "3")
    try:
        ready = json.loads(process.stdout.readline())
        assert ready["type"] == "ready" and ready["kind"] == "run" and ready["has_test_set"]
        assert ready["class_names"] == [str(i) for i in range(10)] and ready["input_shape"] == [8, 8, 1]

        def ask(request: dict | str, answers: int = 1) -> list[dict]:
            process.stdin.write((request if isinstance(request, str) else json.dumps(request)) + "\n")
            process.stdin.flush()
            return [json.loads(process.stdout.readline()) for _ in range(answers)]

        error, found = ask({"id": 1, "images": [str(paths[0]), str(broken), str(paths[1])]}, answers=2)
        assert error["type"] == "error" and error["id"] == 1 and error["image"] == str(broken)
        assert str(broken) in error["message"] and "\n" not in error["message"]
        assert found["type"] == "predictions" and found["id"] == 1
        predictions = [Prediction.from_dict(p, ready["class_names"]) for p in found["predictions"]]
        assert [p.source for p in predictions] == [str(paths[0]), str(paths[1])]
        for prediction, image, label, raw in zip(predictions, images, labels, found["predictions"]):
            np.testing.assert_array_equal(prediction.image, image)  # shown as the model sees it
            assert prediction.label is None and raw["label"] is None and len(raw["top"]) == 3
            assert prediction.top(1)[0][0] == label
            assert abs(float(prediction.probabilities.sum()) - 1.0) < 1e-5

        # The files themselves in the request (the window's images for a model on an SSH host):
        # the same answers as for their paths, named by the source given.
        sent = [{"source": f"here/{path.name}", "data": base64.b64encode(path.read_bytes()).decode()}
                for path in (paths[0], broken, paths[1])]
        *errors, found = ask({"id": 6, "files": [*sent, {"source": "x.png", "data": "@@"}]}, answers=3)
        assert [(e["type"], e["id"], e["image"]) for e in errors] == [("error", 6, "here/broken.png"),
                                                                      ("error", 6, "x.png")]
        assert "here/broken.png" in errors[0]["message"]
        assert errors[1]["message"] == "x.png: its data is not base64"
        assert [p["source"] for p in found["predictions"]] == [f"here/{paths[0].name}", f"here/{paths[1].name}"]
        for raw, image in zip(found["predictions"], images):
            np.testing.assert_array_equal(Prediction.from_dict(raw, ready["class_names"]).image, image)
        [bad] = ask({"id": 7, "files": ["seven.png"]})
        assert bad["type"] == "error" and bad["message"].startswith("files: must be a list")

        [samples] = ask({"id": 2, "test_samples": 4})
        assert samples["type"] == "predictions" and samples["id"] == 2 and len(samples["predictions"]) == 4
        assert all(p["label"] in range(10) and p["source"].startswith("test image") for p in samples["predictions"])

        [bad] = ask("this is not json")
        assert bad["type"] == "error" and bad["message"].startswith("not a request")
        [bad] = ask({"id": 3, "test_samples": "many"})
        assert bad["type"] == "error" and bad["id"] == 3 and "test_samples" in bad["message"]
        process.stdin.close()  # end of input ends the session
        assert process.wait(60) == 0
    finally:
        process.kill()


def test_predict_serve_on_a_bad_model_exits_2_with_one_line(tmp_path):
    done = subprocess.run(app_command("predict", "--serve", str(tmp_path / "missing.onnx")), input="",
                          capture_output=True, text=True, env=app_env(), timeout=TIMEOUT_S)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("replica-studio predict: ") and "missing.onnx" in lines[0]
