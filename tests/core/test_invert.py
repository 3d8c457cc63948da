"""When an image is inverted before a model sees it (gui_app.core.predictions.as_model_expects):
a dark digit on white paper, shown to a model that learnt light strokes on a dark background."""
from __future__ import annotations

import numpy as np
import pytest

from gui_app.core.predictions import Prediction, as_model_expects, border_mean

DARK_ON_WHITE = np.full((8, 8, 1), 250, np.uint8)
DARK_ON_WHITE[2:6, 3:5] = 10  # a stroke in the middle
LIGHT_ON_DARK = 255 - DARK_ON_WHITE


def test_a_light_border_is_inverted_for_a_model_of_dark_backgrounds_only():
    assert border_mean(DARK_ON_WHITE) == 250.0 and border_mean(LIGHT_ON_DARK) == 5.0
    image, why = as_model_expects(DARK_ON_WHITE, "auto", dark_background=True)
    assert why == "light background"
    np.testing.assert_array_equal(image, LIGHT_ON_DARK)
    assert as_model_expects(LIGHT_ON_DARK, "auto", dark_background=True)[1] is None
    assert as_model_expects(DARK_ON_WHITE, "auto", dark_background=False)[1] is None  # e.g. CIFAR photos
    assert as_model_expects(DARK_ON_WHITE, "never", dark_background=True)[1] is None
    image, why = as_model_expects(LIGHT_ON_DARK, "always", dark_background=False)
    assert why == "asked" and image[0, 0, 0] == 250
    with pytest.raises(ValueError, match="invert: must be one of auto, always, never"):
        as_model_expects(DARK_ON_WHITE, "yes", dark_background=True)


def test_why_an_image_was_inverted_goes_to_the_window_and_back():
    prediction = Prediction("three.png", LIGHT_ON_DARK, np.full(10, 0.1, np.float32), [str(i) for i in range(10)],
                            inverted="light background")
    data = prediction.to_dict()
    assert data["inverted"] == "light background"
    assert Prediction.from_dict(data, prediction.class_names).inverted == "light background"
    del data["inverted"]  # a prediction not inverted (or of an older engine) says nothing
    assert Prediction.from_dict(data, prediction.class_names).inverted is None
