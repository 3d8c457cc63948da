"""The tabs of a run on an SSH host (``HOST:RUN_DIR``), without a host: the Evaluation tab asks for
its gallery's images and shows them when they come (or why not); the Try tab runs the model's
process with ``--host``, sends the images themselves and, after its process dies, starts it again
with the next ones; the window knows a host's completed run has a model. With a real host:
tests/ui/test_remote_window_tabs.py."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from stub_run import StubRun

from gui_app.core.events import Eval, RunStarted
from gui_app.core.history import RunHistory
from gui_app.ui.tabs.evaluation import EvaluationTab
from gui_app.ui.tabs.try_model import TryTab
from gui_app.ui.window.window_state import WindowState

KEY = "gpu1:/home/me/runs/a"


def test_the_gallery_of_a_host_run_is_asked_for_and_shown_when_it_comes(qtbot, monkeypatch):
    tab = EvaluationTab()
    qtbot.addWidget(tab)
    asked: list[str] = []
    monkeypatch.setattr(tab._remote, "fetch", asked.append)
    history = RunHistory()
    history.add([RunStarted(run_dir=KEY, config={}), Eval(loss=0.5, accuracy=0.5, examples=4,
                                               confusion_matrix=[[1, 1], [1, 1]], class_names=["a", "b"])])
    tab.set_history(history)
    assert asked == [KEY] and tab._gallery_title.text() == "Misclassified test images: copying them from gpu1…"
    wrong = {"x": np.zeros((2, 8, 8, 1), np.uint8), "y_true": np.array([0, 1]), "y_pred": np.array([1, 0]),
             "confidence": np.array([0.9, 0.6])}
    tab._remote.fetched.emit("gpu1:/home/me/runs/other", wrong, "")  # another run's: not this one's gallery
    assert tab.gallery.count() == 0
    tab._remote.fetched.emit(KEY, wrong, "")
    assert tab.gallery.count() == 2 and tab.gallery.item(0).text() == "a\n→ b 90%"
    tab._remote.fetched.emit(KEY, None, "gpu1: cannot copy /home/me/runs/a/misclassified.npz back: no such file")
    assert tab.gallery.count() == 0 and tab._gallery_title.text() == (
        "Misclassified test images: not copied back (gpu1: cannot copy /home/me/runs/a/misclassified.npz back: "
        "no such file)")


# A stand-in for ``predict --serve`` there: ready, then one prediction per file sent (the request's
# files are what it can see; it has no paths of ours).
_SERVER = """
import base64, json, sys
import numpy as np
from gui_app.core.predictions import Prediction
print(json.dumps({"type": "ready", "model": "/home/me/runs/a", "kind": "run", "class_names": ["a", "b"],
                  "input_shape": [8, 8, 1], "warnings": [], "has_test_set": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    found = [Prediction(f["source"], np.full((8, 8, 1), len(base64.b64decode(f["data"])) % 256, np.uint8),
                        np.array([0.25, 0.75], np.float32), ["a", "b"]).to_dict() for f in request["files"]]
    print(json.dumps({"type": "predictions", "id": request["id"], "predictions": found}), flush=True)
"""


def test_the_try_tab_sends_the_images_to_a_host_model_and_loads_it_again_after_a_drop(qtbot, tmp_path):
    commands: list[tuple[str, ...]] = []

    def engine_command(*args: str) -> list[str]:
        commands.append(args)
        return [sys.executable, "-c", _SERVER]

    tab = TryTab(engine_command=engine_command)
    qtbot.addWidget(tab)
    image = tmp_path / "seven.png"
    image.write_bytes(b"seven")  # its bytes go over the connection: the stand-in sees 5 of them
    with qtbot.waitSignal(tab.model_loaded, timeout=30_000):
        tab.set_model_source(KEY)
    assert commands == [("predict", "--serve", "/home/me/runs/a", "--top", "5", "--host", "gpu1")]
    with qtbot.waitSignal(tab.predictions_ready, timeout=30_000) as ready:
        tab.add_image_files([image, tmp_path / "missing.png"])
    (prediction,) = ready.args[0]
    assert prediction.source == str(image) and int(prediction.image[0, 0, 0]) == 5
    assert [row.source for row in tab._error_rows] == [str(tmp_path / "missing.png")]  # not readable here
    with qtbot.waitSignal(tab.failed, timeout=30_000) as failed:
        tab._server._process._process.kill()  # as a dropped connection ends it
    assert failed.args[0].endswith("; the model loads there again with the next images")
    assert len(tab._rows) == 1  # the tab goes on
    with qtbot.waitSignal(tab.predictions_ready, timeout=30_000):
        tab.add_image_files([image])
    assert len(commands) == 2 and len(tab._rows) == 2
    tab.shutdown()


def test_a_host_run_completed_on_screen_has_a_model(qtbot, runs_dir):
    run = StubRun()
    state = WindowState(run, runs_dir)
    state.set_shown_run(KEY)  # its folder is not here: nothing to find
    assert state.model_run() is None
    run.start(KEY)
    run.end("completed", KEY)
    assert state.model_run() == KEY and state.export_run() == KEY
    state.set_shown_run(KEY, has_model=False)  # opened again while it runs, say
    assert state.model_run() is None
    state.set_shown_run(KEY, has_model=True)
    assert state.model_run() == KEY


# A stand-in for ``hosts fetch HOST PATH --to DIR --json``: copies the file named by the host's path
# here (its run folder is in the test's folder) and answers as the command does.
FAKE_FETCH = ("import json, shutil, sys, pathlib; path, to = sys.argv[4], pathlib.Path(sys.argv[6]); "
              "shutil.copy(path, to); "
              "print(json.dumps({'type': 'fetched', 'path': str(to / pathlib.Path(path).name)}))")


def test_the_gallery_is_copied_by_an_engine_process_then_read_and_its_copy_removed(qtbot, tmp_path):
    from gui_app.core.misclassified import load_misclassified
    from gui_app.ui.workers.remote_gallery import RemoteGallery

    run_dir = tmp_path / "there" / "a"
    run_dir.mkdir(parents=True)
    np.savez(run_dir / "misclassified.npz", x=np.zeros((2, 8, 8, 1), np.uint8), y_true=np.array([0, 1]),
             y_pred=np.array([1, 0]), confidence=np.array([0.9, 0.6]))
    commands: list[list[str]] = []

    def engine(*args: str) -> list[str]:
        commands.append(list(args))
        return [sys.executable, "-c", FAKE_FETCH, *args]

    gallery = RemoteGallery(load_misclassified, engine)
    came: list[tuple] = []
    gallery.fetched.connect(lambda *result: came.append(result))
    gallery.fetch(f"gpu1:{run_dir}")
    qtbot.waitUntil(lambda: bool(came), timeout=20_000)
    key, arrays, problem = came[0]
    assert key == f"gpu1:{run_dir}" and problem == "" and list(arrays["y_true"]) == [0, 1]
    assert commands[0][:4] == ["hosts", "fetch", "gpu1", f"{run_dir}/misclassified.npz"]
    assert not Path(commands[0][5]).exists()  # the copy here is gone once read


def test_a_gallery_that_cannot_be_copied_is_the_hosts_one_line(qtbot, tmp_path, monkeypatch):
    from gui_app.core.misclassified import load_misclassified
    from gui_app.identity import app_command
    from gui_app.ui.workers.remote_gallery import RemoteGallery

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # ssh's shared connections: the test's own folder
    folders: list[str] = []

    def engine(*args: str) -> list[str]:  # the real command: ssh fails at once on a name that does not resolve
        folders.append(args[5])
        return app_command(*args)

    gallery = RemoteGallery(load_misclassified, engine)
    came: list[tuple] = []
    gallery.fetched.connect(lambda *result: came.append(result))
    gallery.fetch("rs-no-such-host.invalid:/home/me/runs/a")
    qtbot.waitUntil(lambda: bool(came), timeout=30_000)
    key, arrays, problem = came[0]
    assert arrays is None and problem.startswith("rs-no-such-host.invalid: ") and "\n" not in problem, problem
    qtbot.waitUntil(lambda: not Path(folders[0]).exists())  # removed when the copy failed
