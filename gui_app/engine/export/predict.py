"""Try a model on images: a run folder or any exported file, read with its model card.

The card gives class names (in output order) and the preprocessing; without one we fall
back to numbered classes and dividing by 255, and say so in :attr:`Predictor.warnings`.
Image files are decoded, converted to the model's channels and resized exactly as the
``image_folder`` dataset does it, so a picture is seen the way training images were. A model
trained on light digits on a dark background (:data:`DARK_BACKGROUND_DATASETS`) gets a picture
with a light background inverted first, unless asked otherwise (gui_app.core.predictions).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gui_app.core.formats import PIXEL_SCALE, UNVERIFIED_SAVEDMODEL_FLAG, ExportError
from gui_app.core.predictions import Prediction, as_model_expects
from gui_app.engine.datasets.images import decode_image
from gui_app.engine.export.model_card import read_card
from gui_app.engine.export.runtimes import Runtime, detect_kind, import_tensorflow, open_runtime, scale_pixels

# Light subjects on a dark background: what a dark digit on white paper must be turned into.
DARK_BACKGROUND_DATASETS = ("digits", "mnist", "fashion_mnist")


@dataclass
class Predictor:
    source: Path
    kind: str  # run | keras | savedmodel | tflite | onnx
    runtime: Runtime
    class_names: list[str]
    card: dict[str, Any] | None = None
    dataset_config: Any = None  # the DatasetConfig the model was trained on, when known
    scale: float = PIXEL_SCALE
    offset: float = 0.0
    warnings: list[str] = field(default_factory=list)
    dark_background: bool = False  # it learnt light subjects on a dark background
    _test_set: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return self.runtime.input_shape

    def predict(self, images: np.ndarray) -> np.ndarray:
        """uint8 (N, H, W, C) -> (N, classes) probabilities."""
        out = self.runtime(scale_pixels(images, self.scale, self.offset))
        if self.card is None and not _looks_like_probabilities(out):
            out = _softmax(out)  # a file of unknown origin that returns logits
        elif self.runtime.output_quantization:
            # int8 probabilities are multiples of 1/256 and sum to 1 only within ~1 %.
            out = out / np.maximum(out.sum(axis=1, keepdims=True), 1e-12)
        return out.astype(np.float32)

    def predict_images(self, images: np.ndarray, sources: Sequence[str], labels: Sequence[int] | None = None,
                       invert: str = "never") -> list[Prediction]:
        """``invert`` (auto, always, never): whether the images are inverted first (auto: those
        with a light background, for a model that learnt dark ones)."""
        seen = [as_model_expects(image, invert, self.dark_background) for image in images]
        if seen:
            images = np.stack([image for image, _ in seen])
        probabilities = self.predict(images)
        return [Prediction(src, img, p, self.class_names, None if labels is None else int(labels[i]), why)
                for i, (src, img, p, (_, why)) in enumerate(zip(sources, images, probabilities, seen))]

    def predict_files(self, paths: Sequence[str | Path], invert: str = "auto") -> list[Prediction]:
        images = np.stack([read_image(p, self.input_shape) for p in paths]) if paths else \
            np.zeros((0, *self.input_shape), np.uint8)
        return self.predict_images(images, [str(p) for p in paths], invert=invert)

    def test_samples(self, count: int, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``count`` random images and labels of the model's test set (loaded once)."""
        if self.dataset_config is None:
            raise ExportError(f"{self.source}: no model card or run config says which dataset the model was "
                              f"trained on")
        if self._test_set is None:
            from gui_app.engine.datasets import DatasetError, load_dataset

            try:
                dataset = load_dataset(self.dataset_config)
            except DatasetError as exc:
                raise ExportError(str(exc)) from None
            if dataset.input_shape != self.input_shape:
                raise ExportError(f"{self.source}: the model takes {self.input_shape} images but its dataset "
                                  f"has {dataset.input_shape}")
            self._test_set = (dataset.x_test, dataset.y_test)
        x, y = self._test_set
        chosen = np.random.default_rng(seed).choice(len(x), size=min(count, len(x)), replace=False)
        return x[chosen], y[chosen]


def _looks_like_probabilities(out: np.ndarray) -> bool:
    return bool(out.size) and float(out.min()) >= 0.0 and bool(np.all(np.abs(out.sum(axis=1) - 1.0) < 0.05))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def load_predictor(source: str | Path, allow_unverified_savedmodel: bool = False) -> Predictor:
    """Open a run folder, ``.keras`` file, SavedModel folder, ``.tflite`` or ``.onnx`` file.

    A SavedModel folder is loaded only when its model card's hash matches (we exported it),
    unless ``allow_unverified_savedmodel`` (the user said they trust it): loading one runs its
    graph. ``.keras`` files are always loaded with ``safe_mode=True`` (no Lambda layers)."""
    from gui_app.core.config import ConfigError, RunConfig
    from gui_app.core.rundir import CONFIG_FILE
    from gui_app.engine.export.model_card import verify_savedmodel

    source = Path(source).expanduser()
    kind = detect_kind(source)
    warnings: list[str] = []
    card, config, names = None, None, None
    if kind == "run":
        try:
            config = RunConfig.load(source / CONFIG_FILE)
        except ConfigError as exc:
            warnings.append(f"{source / CONFIG_FILE}: {exc}")
        names = _run_class_names(source)
    else:
        card = read_card(source)
        if card is None:
            warnings.append(f"{source}: no model card ({source.name}.json) beside it: classes are numbered "
                            f"and pixels are divided by 255")
        else:
            names = card["class_names"]
            try:
                config = RunConfig.from_dict(card.get("run_config"))
            except ConfigError:
                config = None
        if kind == "savedmodel" and not allow_unverified_savedmodel:
            why = verify_savedmodel(source, card)
            if why:
                raise ExportError(f"{source}: not opened: loading a SavedModel runs its graph, and {why}; "
                                  f"if you trust it, pass {UNVERIFIED_SAVEDMODEL_FLAG}")
    runtime = open_runtime(source, kind)
    probe = runtime(np.zeros((1, *runtime.input_shape), np.float32))
    classes = probe.shape[-1]
    if names is None:
        names = [str(i) for i in range(classes)]
    if len(names) != classes:
        raise ExportError(f"{source}: the model has {classes} outputs but its card names {len(names)} classes")
    pre = (card or {}).get("preprocessing") or {}
    names = [str(n) for n in names]
    if config is not None:
        dark = config.dataset.name in DARK_BACKGROUND_DATASETS
    else:  # a file of unknown origin: a grey classifier of the ten digits is taken for an MNIST one
        dark = runtime.input_shape[2] == 1 and names == [str(i) for i in range(10)]
    return Predictor(source, kind, runtime, names, card, config.dataset if config is not None else None,
                     float(pre.get("scale", PIXEL_SCALE)), float(pre.get("offset", 0.0)), warnings, dark)


def _run_class_names(run_dir: Path) -> list[str] | None:
    """From eval.json, else from the run_started event (a run stopped before evaluation)."""
    from gui_app.core.events import RunStarted
    from gui_app.core.rundir import read_eval, read_events

    try:
        evaluation = read_eval(run_dir)
    except ValueError:
        evaluation = None
    if evaluation is not None and evaluation.class_names:
        return evaluation.class_names
    names = None
    for event in read_events(run_dir):
        if isinstance(event, RunStarted):
            names = event.dataset.get("class_names")
    return names or None


def read_image(path: str | Path, input_shape: tuple[int, int, int]) -> np.ndarray:
    """An image file as the model sees it: (H, W, C) uint8 with the model's channels and size.

    The very function the image_folder dataset decodes with, so a picture is seen the way
    training images were.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ExportError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return image_from_bytes(data, str(path), input_shape)


def image_from_bytes(data: bytes, source: str, input_shape: tuple[int, int, int]) -> np.ndarray:
    """The bytes of an image file (named ``source`` in errors) as the model sees it, as :func:`read_image`."""
    height, width, channels = input_shape
    import_tensorflow()  # keeps the GPU out of this process when TensorFlow starts here
    try:
        return decode_image(data, (height, width), channels)
    except ValueError as exc:
        raise ExportError(f"{source}: {exc}") from None
