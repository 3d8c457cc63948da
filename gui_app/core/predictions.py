"""A prediction of one image, as the engine's ``predict`` sends it and the Try tab shows it.

NumPy only (no TensorFlow, no Qt): :mod:`gui_app.engine.export.predict` makes these, the
``predict --serve`` process writes them as JSON lines (:meth:`Prediction.to_dict`) and the
window reads them back (:meth:`Prediction.from_dict`) with the pixels the model saw. An image
for a model on an SSH host goes in the request itself (:func:`sent_file`, :func:`received_file`).

A digit drawn dark on white paper, shown to a model that learnt light strokes on a dark
background (MNIST, the bundled digits), was called another digit: :func:`as_model_expects`
inverts it first -- when asked ("always"), or ("auto") when the image's border, its background
for a centred subject, is lighter than the middle of the range -- and the prediction says so.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np


@dataclass
class Prediction:
    source: str  # the file, or "test image 12"
    image: np.ndarray  # (H, W, C) uint8: what the model sees
    probabilities: np.ndarray  # (classes,) float32, sums to 1
    class_names: list[str]
    label: int | None = None  # the true class, when known (test-set samples)
    inverted: str | None = None  # why the image was inverted before predicting (:data:`INVERTED`), if it was

    def top(self, k: int = 5) -> list[tuple[int, str, float]]:
        """The ``k`` most likely classes as (index, name, probability), most likely first."""
        order = np.argsort(-self.probabilities, kind="stable")[:k]
        return [(int(i), self.class_names[i], float(self.probabilities[i])) for i in order]

    def to_dict(self, k: int = 5, pixels: bool = True) -> dict[str, Any]:
        """JSON-ready; ``pixels`` adds the image as the model sees it (base64 uint8 + shape)."""
        out: dict[str, Any] = {
            "source": self.source, "label": self.label,
            "top": [{"class": i, "name": n, "probability": p} for i, n, p in self.top(k)],
            "probabilities": [float(p) for p in self.probabilities]}
        if self.inverted:
            out["inverted"] = self.inverted
        if pixels:
            image = np.ascontiguousarray(self.image, np.uint8)
            out["image"] = {"shape": list(image.shape), "pixels": base64.b64encode(image.tobytes()).decode("ascii")}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], class_names: Sequence[str]) -> Prediction:
        """The inverse of :meth:`to_dict` (with pixels); ValueError names what is wrong."""
        try:
            shape = tuple(int(n) for n in data["image"]["shape"])
            pixels = np.frombuffer(base64.b64decode(data["image"]["pixels"]), np.uint8)
            image = pixels.reshape(shape)
            probabilities = np.asarray(data["probabilities"], np.float32)
            label = data.get("label")
            inverted = data.get("inverted")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a prediction: {type(exc).__name__}: {exc}") from None
        if len(shape) != 3 or probabilities.shape != (len(class_names),):
            raise ValueError(f"not a prediction: image shape {shape}, {probabilities.size} probabilities "
                             f"for {len(class_names)} classes")
        return cls(str(data.get("source", "")), image, probabilities, [str(n) for n in class_names],
                   None if label is None else int(label), inverted if inverted in INVERTED else None)


INVERT_MODES = ("auto", "always", "never")  # a predict request's "invert"; "auto" when it says nothing
# Why an image was inverted: asked to, or its background is light and the model learnt dark ones.
INVERTED = {"asked": "inverted, as asked", "light background": "inverted: its background is light"}
LIGHT = 127.5  # the middle of 0..255: a border above it is a light background


def border_mean(image: np.ndarray) -> float:
    """The mean of an (H, W, C) image's outermost pixels: its background, for a centred subject."""
    image = np.asarray(image, np.float64)
    if image.shape[0] < 3 or image.shape[1] < 3:
        return float(image.mean())
    return float(np.concatenate([image[0].ravel(), image[-1].ravel(),
                                 image[1:-1, 0].ravel(), image[1:-1, -1].ravel()]).mean())


def as_model_expects(image: np.ndarray, invert: str, dark_background: bool) -> tuple[np.ndarray, str | None]:
    """``image`` (uint8) as the model is to see it, and why it was inverted (a key of
    :data:`INVERTED`) or None. ``invert`` is one of :data:`INVERT_MODES`; ``dark_background``:
    the model learnt light subjects on a dark background, so a light one is inverted on "auto"."""
    if invert not in INVERT_MODES:
        raise ValueError(f"invert: must be one of {', '.join(INVERT_MODES)}; got {invert!r}")
    if invert == "always":
        return 255 - image, "asked"
    if invert == "auto" and dark_background and border_mean(image) > LIGHT:
        return 255 - image, "light background"
    return image, None


MAX_SENT_BYTES = 32 << 20  # an image sent to a host's model: a photo is a few MiB; more is no image


def sent_file(path: str) -> dict[str, str]:
    """An image file as an entry of a ``files`` request: its bytes go over the connection
    (OSError when it cannot be read or is too large)."""
    if Path(path).stat().st_size > MAX_SENT_BYTES:
        raise OSError(f"larger than {MAX_SENT_BYTES >> 20} MiB, too large to send")
    return {"source": path, "data": base64.b64encode(Path(path).read_bytes()).decode("ascii")}


def received_file(entry: dict[str, str]) -> bytes:
    """The bytes of a ``files`` entry; ValueError when its data is not base64."""
    try:
        return base64.b64decode(entry["data"], validate=True)
    except ValueError:
        raise ValueError(f"{entry['source']}: its data is not base64") from None
