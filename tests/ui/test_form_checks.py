"""When the forms check what is typed, and what gates Train: a field typed into is checked when
typing pauses or the field loses focus (the inspection runs an engine process: never on a
half-typed path), an answer is shown only about what is on the forms now, and Train waits for
the last check of the dataset and model on screen to pass."""
from __future__ import annotations

from PySide6.QtCore import Qt

import numpy as np
import pytest
from form_errors import shown_errors
from pngs import write_png

from gui_app.ui.config.config_panel import CHECKING


@pytest.fixture
def shown_panel(panel, qtbot):
    """The panel on screen, with the first launch's check done (typing needs focus)."""
    panel.show()
    qtbot.waitExposed(panel)
    panel.activateWindow()
    qtbot.waitUntil(lambda: not panel.inspector.is_busy(), timeout=10_000)
    return panel


def _type_into(qtbot, edit, text: str, slowly: str = "") -> None:
    """Type ``text``, then ``slowly`` a key every 0.3 s: slower than the inspector's own
    debounce (0.25 s), faster than the typing pause."""
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus)
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Delete)
    qtbot.keyClicks(edit, text)
    qtbot.keyClicks(edit, slowly, delay=300)


def _choose(combo, name: str) -> None:
    combo.setCurrentIndex(combo.findData(name))


def _image_folder(root, size=(8, 8), per_class=2):
    for label in ("a", "b"):
        (root / label).mkdir(parents=True)
        for i in range(per_class):
            write_png(root / label / f"{i}.png", np.full((*size, 1), 40 * i, np.uint8))
    return root


def test_a_path_typed_in_is_checked_once_typing_pauses_never_half_typed(shown_panel, qtbot, tmp_path):
    panel = shown_panel
    folder = _image_folder(tmp_path / "data" / "my_images")
    _choose(panel.dataset.name, "image_folder")
    asked: list[str] = []
    panel.inspector.started.connect(lambda pair: asked.append(pair[0].path))
    # "/data/my_images" typed at a typist's pace: "/data/" and "/data/my" are folders, and
    # inspecting them said "class folder has no images" (and saved the half-typed path).
    _type_into(qtbot, panel.dataset.path, f"{folder.parent}/", slowly=folder.name)
    # While typing: no message about the half-typed path, nothing inspected, Train waits.
    assert shown_errors(panel) == {} and asked == [] and panel._pause.isActive()
    assert panel.train_blocker() and panel.checked_config() is None
    with qtbot.waitSignal(panel.inspected, timeout=10_000):
        pass  # the pause checks it
    assert asked == [str(folder)]
    assert panel.train_blocker() == "" and panel.checked_config().dataset.path == str(folder)


def test_a_wrong_path_is_flagged_when_the_field_is_left(shown_panel, qtbot, tmp_path):
    panel = shown_panel
    _choose(panel.dataset.name, "npz")
    _type_into(qtbot, panel.dataset.path, str(tmp_path / "mnist.np"))
    assert shown_errors(panel) == {}
    panel.training.epochs.setFocus()  # leaving the field checks it at once
    qtbot.waitUntil(lambda: "dataset.path" in shown_errors(panel))
    assert shown_errors(panel) == {"dataset.path": f"no such file or folder: {tmp_path / 'mnist.np'}"}
    assert panel.dataset.status.text() == ""  # no summary of another path stays beside it


def test_train_waits_for_the_check_and_stays_off_when_it_failed(shown_panel, qtbot, tmp_path):
    panel = shown_panel
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"bad data")
    blockers: list[str] = []
    panel.readiness_changed.connect(blockers.append)
    _choose(panel.dataset.name, "npz")
    with qtbot.waitSignal(panel.inspect_failed, timeout=10_000):
        _type_into(qtbot, panel.dataset.path, str(bad))
    assert CHECKING in blockers  # while the check ran
    assert panel.is_valid() and panel.checked_config() is None
    assert panel.train_blocker() == ("The check of the dataset and model failed: "
                                     f"{bad}: not an .npz file (no zip signature at its start)")
    assert panel.dataset.check_again_link.isVisible()
    labels = np.arange(20) % 10
    with bad.open("wb") as f:  # fixed on disk (an .npz the real loader reads): Check again
        np.savez(f, x_train=np.zeros((20, 8, 8), np.uint8), y_train=labels, x_test=np.zeros((10, 8, 8), np.uint8),
                 y_test=labels[:10])
    with qtbot.waitSignal(panel.inspected, timeout=10_000):
        panel.dataset.check_again_link.linkActivated.emit("#")
    assert panel.train_blocker() == "" and not panel.dataset.check_again_link.isVisible()


def test_switching_the_dataset_type_clears_the_old_types_summary(shown_panel, qtbot, tmp_path):
    panel = shown_panel
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"bad data")
    _choose(panel.dataset.name, "npz")
    with qtbot.waitSignal(panel.inspect_failed, timeout=10_000):
        _type_into(qtbot, panel.dataset.path, str(bad))
    panel.training.epochs.setFocus()
    with qtbot.waitSignal(panel.inspect_cleared, timeout=1_000):
        _choose(panel.dataset.name, "digits")
    assert "not an .npz file" not in panel.dataset.status.text()
    assert not panel.model.layers.isEnabled()  # the old model table is marked stale until the answer
    with qtbot.waitSignal(panel.inspected, timeout=10_000):
        pass
    assert panel.model.layers.isEnabled() and panel.train_blocker() == ""


def test_an_answer_about_sections_no_longer_on_the_forms_is_never_shown(shown_panel, qtbot, tmp_path):
    panel = shown_panel
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"bad data")
    _choose(panel.dataset.name, "npz")
    panel.dataset.path.setText(str(bad))
    pair = panel._pair
    _choose(panel.dataset.name, "digits")  # the user moved on before the answer came
    panel.inspector.failed.emit(pair, f"{bad}: not an .npz file")
    assert "not an .npz" not in panel.dataset.status.text()
    with qtbot.waitSignal(panel.inspected, timeout=10_000):
        pass
    assert panel.train_blocker() == ""


def test_an_image_folder_sets_its_images_size_and_colour_or_offers_them(shown_panel, qtbot, tmp_path):
    """8x8 grey PNGs trained at the default 32x32 RGB had 24 times the parameters for nothing."""
    panel = shown_panel
    form = panel.dataset
    folder = _image_folder(tmp_path / "digits", size=(8, 8))
    _choose(form.name, "image_folder")
    with qtbot.waitSignal(panel.inspected, timeout=10_000):
        _type_into(qtbot, form.path, str(folder))
    assert (panel.config().dataset.image_size, panel.config().dataset.color_mode) == ((8, 8), "grayscale")
    assert form.source_images.note.text() == "The images are 8×8 grey: size and colour set from them."
    # A size the user types stays; the images' own is offered with one button.
    with qtbot.waitSignal(panel.inspected, timeout=10_000):
        _type_into(qtbot, form.image_height, "16")
    assert panel.config().dataset.image_size == (16, 8)
    assert form.source_images.use_button.isVisible() and form.source_images.use_button.text() == "Use 8×8 grey"
    with qtbot.waitSignal(panel.inspected, timeout=10_000):
        qtbot.mouseClick(form.source_images.use_button, Qt.MouseButton.LeftButton)
    assert panel.config().dataset.image_size == (8, 8) and not form.source_images.use_button.isVisible()


def test_open_asks_for_what_the_chosen_type_is(panel, qtbot, tmp_path, monkeypatch):
    """Open… popped a menu of formats although the type was chosen above it."""
    from gui_app.ui.config import dataset_form

    asked = []
    monkeypatch.setattr(dataset_form.QFileDialog, "getExistingDirectory",
                        lambda _parent, title, _start: asked.append(("folder", title)) or str(tmp_path))
    monkeypatch.setattr(dataset_form.QFileDialog, "getOpenFileName",
                        lambda _parent, title, _start, _filter: asked.append(("file", title)) or ("", ""))
    for name in ("image_folder", "npz"):
        _choose(panel.dataset.name, name)
        qtbot.mouseClick(panel.dataset.open_button, Qt.MouseButton.LeftButton)
    assert asked == [("folder", "Open a folder with one sub-folder per class"), ("file", "Open a NumPy dataset")]
    assert panel.dataset.open_button.menu() is None
