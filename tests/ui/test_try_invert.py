"""The Try tab on a dark digit on white paper, as a user draws one: one of the bundled digits'
3s turned dark-on-white and enlarged, tried on the real digits run (trained by the real engine,
tests/reference_run.py) through the real ``predict --serve``. It was called "4": the model learnt
light strokes on a dark background."""
from __future__ import annotations

import numpy as np
import pytest
from pngs import write_png

from gui_app.core.config import DatasetConfig
from gui_app.engine.datasets import load_dataset
from gui_app.ui.tabs.prediction_rows import PredictionRow
from gui_app.ui.tabs.try_model import DIGITS_HINT, TryTab

TIMEOUT_MS = 120_000
SCALE = 8  # 8x8 digits drawn at 64x64: the engine resizes them back, as it does a photo


@pytest.fixture(scope="module")
def threes(tmp_path_factory):
    """The first five 3s of the bundled test set, each as a light-on-dark PNG (as the model learnt
    them) and a dark-on-white one (as a user draws them), both enlarged."""
    folder = tmp_path_factory.mktemp("threes")
    data = load_dataset(DatasetConfig(name="digits"))
    picks = np.flatnonzero(data.y_test == 3)[:5]
    light, dark = [], []
    for i in picks:
        big = np.kron(data.x_test[i][..., 0], np.ones((SCALE, SCALE), np.uint8))
        light.append(write_png(folder / f"three-{i}-as-learnt.png", big))
        dark.append(write_png(folder / f"three-{i}-on-paper.png", 255 - big))
    return light, dark


@pytest.fixture
def try_tab(qtbot, trained_run):
    tab = TryTab()
    qtbot.addWidget(tab)
    with qtbot.waitSignal(tab.model_loaded, timeout=TIMEOUT_MS):
        tab.set_model_source(trained_run)
    yield tab
    tab.shutdown()


def _classify(qtbot, tab: TryTab, paths) -> list:
    with qtbot.waitSignal(tab.predictions_ready, timeout=TIMEOUT_MS) as ready:
        tab.add_image_files(paths)
    return ready.args[0]


def test_a_dark_three_on_white_is_inverted_by_itself_and_called_three(qtbot, try_tab, threes):
    light, dark = threes
    assert DIGITS_HINT in try_tab._status.text() and try_tab.invert.auto.isVisibleTo(try_tab)
    as_learnt = _classify(qtbot, try_tab, light)
    assert [p.inverted for p in as_learnt] == [None] * 5  # a dark background is left as it is
    right = [p.top(1)[0][1] == "3" for p in as_learnt]
    assert sum(right) >= 4  # the run is ~95 % right on its test set
    on_paper = _classify(qtbot, try_tab, dark)
    assert [p.inverted for p in on_paper] == ["light background"] * 5
    for found, was_right, learnt in zip(on_paper, right, as_learnt):
        if was_right:
            assert found.top(1)[0][1] == "3", found.top(3)
        np.testing.assert_allclose(found.image, learnt.image, atol=1)  # seen as the model learnt it
    row = try_tab.findChildren(PredictionRow)[-1]
    assert "inverted: its background is light" in row.caption.text()
    # Unticked, the image is seen as drawn: dark on white, which the model does not read as a 3.
    try_tab.invert.auto.setChecked(False)
    as_drawn = _classify(qtbot, try_tab, dark)
    assert [p.inverted for p in as_drawn] == [None] * 5
    assert sum(p.top(1)[0][1] == "3" for p in as_drawn) < sum(right)
    # Invert ticked: every image is inverted, asked for (a light-on-dark one then reads wrong).
    try_tab.invert.always.setChecked(True)
    asked = _classify(qtbot, try_tab, dark[:1])
    assert asked[0].inverted == "asked" and asked[0].top(1)[0][1] == on_paper[0].top(1)[0][1]
    assert "inverted, as asked" in try_tab.findChildren(PredictionRow)[-1].caption.text()
