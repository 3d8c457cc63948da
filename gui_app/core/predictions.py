"""A prediction of one image, as the engine's ``predict`` sends it and the Try tab shows it.

NumPy only (no TensorFlow, no Qt): :mod:`gui_app.core.export.predict` makes these, the
``predict --serve`` process writes them as JSON lines (:meth:`Prediction.to_dict`) and the
window reads them back (:meth:`Prediction.from_dict`) with the pixels the model saw. An image
for a model on an SSH host goes in the request itself (:func:`sent_file`, :func:`received_file`).
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
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a prediction: {type(exc).__name__}: {exc}") from None
        if len(shape) != 3 or probabilities.shape != (len(class_names),):
            raise ValueError(f"not a prediction: image shape {shape}, {probabilities.size} probabilities "
                             f"for {len(class_names)} classes")
        return cls(str(data.get("source", "")), image, probabilities, [str(n) for n in class_names],
                   None if label is None else int(label))


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
