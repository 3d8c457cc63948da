"""The models users can pick. Every model outputs logits (no softmax): the loss uses
``from_logits=True`` and exports add the softmax themselves.

``mnist_cnn`` and ``cifar_cnn`` are the two architectures of the tutorials the project grew
from; ``resnet20`` is the CIFAR ResNet of He et al. (2016, section 4.2).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from gui_app.core.config import ModelConfig
from gui_app.core.file_kinds import keras_file_problem
from gui_app.core.messages import first_line


class ModelError(ValueError):
    """The model cannot be built for this dataset, or its file cannot be loaded."""


def _mnist_cnn(keras, inputs, num_classes):
    x = keras.layers.Conv2D(32, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(128, activation="relu")(x)
    return keras.layers.Dense(num_classes, name="logits")(x)


def _cifar_cnn(keras, inputs, num_classes):
    x = keras.layers.Conv2D(32, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(64, 3, activation="relu")(x)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(64, 3, activation="relu")(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(64, activation="relu")(x)
    return keras.layers.Dense(num_classes, name="logits")(x)


def _mlp(keras, inputs, num_classes):
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(256, activation="relu")(x)
    x = keras.layers.Dense(128, activation="relu")(x)
    return keras.layers.Dense(num_classes, name="logits")(x)


def _resnet20(keras, inputs, num_classes):
    layers = keras.layers
    reg = keras.regularizers.L2(1e-4)

    def conv(x, filters, stride=1):
        return layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False,
                             kernel_initializer="he_normal", kernel_regularizer=reg)(x)

    x = layers.ReLU()(layers.BatchNormalization()(conv(inputs, 16)))
    for stage, filters in enumerate((16, 32, 64)):
        for block in range(3):
            stride = 2 if stage > 0 and block == 0 else 1
            y = layers.ReLU()(layers.BatchNormalization()(conv(x, filters, stride)))
            y = layers.BatchNormalization()(conv(y, filters))
            if stride != 1 or x.shape[-1] != filters:  # projection shortcut (option B)
                x = layers.BatchNormalization()(layers.Conv2D(filters, 1, strides=stride, use_bias=False,
                                                              kernel_regularizer=reg)(x))
            x = layers.ReLU()(layers.Add()([x, y]))
    x = layers.GlobalAveragePooling2D()(x)
    return layers.Dense(num_classes, name="logits", kernel_regularizer=reg)(x)


_BUILDERS = {"mnist_cnn": _mnist_cnn, "cifar_cnn": _cifar_cnn, "mlp": _mlp, "resnet20": _resnet20}


def build_model(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int, mixed_precision: bool = False,
                channel_stats: tuple | None = None):
    """Build ``cfg`` for inputs of ``input_shape`` (H, W, C) in [0, 1] and ``num_classes`` classes.

    ``channel_stats`` (per-channel mean and variance of the training images) adds a first
    layer that standardises the input: zero-centred inputs train markedly faster (on digits,
    5 epochs of mnist_cnn reach about 0.95 test accuracy instead of 0.92), and because the
    layer is part of the model every export takes the same [0, 1] images as training did.
    Call inside ``strategy.scope()``. Raises ModelError when the model cannot take the input.
    """
    import keras

    shape = "x".join(map(str, input_shape))
    if cfg.name == "keras_file":
        assert cfg.path is not None  # ModelConfig requires one for keras_file
        return _load_keras_file(keras, cfg.path, tuple(input_shape), num_classes)
    try:
        if cfg.name == "mobilenet_v2":
            if min(input_shape[:2]) < 32:
                raise ModelError(f"model.name: mobilenet_v2 needs images of at least 32x32; the dataset has {shape}")
            base = keras.applications.MobileNetV2(input_shape=tuple(input_shape), weights=None, include_top=True,
                                                  classes=num_classes, classifier_activation=None)

            def builder(keras, x, n):  # the application has its own head for n classes
                return base(x)
        else:
            builder = _BUILDERS[cfg.name]
        inputs = keras.Input(shape=tuple(input_shape), name="image")
        x = inputs
        if channel_stats is not None:
            mean, variance = channel_stats
            x = keras.layers.Normalization(mean=mean, variance=variance, name="standardize")(x)
        outputs = builder(keras, x, num_classes)
        if mixed_precision:  # keep the logits (and so the loss) in float32
            outputs = keras.layers.Activation("linear", dtype="float32", name="logits_fp32")(outputs)
        model = keras.Model(inputs, outputs, name=cfg.name)
    except ModelError:
        raise
    except ValueError as exc:  # e.g. a negative dimension after pooling a too-small image
        raise ModelError(f"model.name: {cfg.name} cannot take {shape} inputs ({first_line(exc)})") from None
    return model


def channel_stats(images, rows=None) -> tuple:
    """Per-channel mean and variance of uint8 NHWC images scaled to [0, 1]: of ``images[rows]``
    when ``rows`` is given, read a chunk at a time (no copy of the set)."""
    import numpy as np

    rows = np.arange(len(images)) if rows is None else np.asarray(rows)
    rows = rows[:: max(1, len(rows) // 20000)]  # enough for 3 decimals
    channels = images.shape[-1]
    if images.dtype == np.uint8:
        # From a histogram of the 256 values per channel: exact, and 10x faster than a float64
        # copy of the sample (0.4 s of every run's start-up on MNIST-sized data).
        counts = np.zeros((channels, 256), np.float64)
        for start in range(0, len(rows), 1024):
            chunk = images[rows[start:start + 1024]].reshape(-1, channels)
            for c in range(channels):
                counts[c] += np.bincount(chunk[:, c], minlength=256)
        levels = np.arange(256, dtype=np.float64) / 255.0
        mean = np.array([counts[c] @ levels / counts[c].sum() for c in range(channels)])
        variance = np.maximum([counts[c] @ (levels - mean[c]) ** 2 / counts[c].sum() for c in range(channels)], 1e-6)
    else:
        sample = images[rows].astype(np.float64) / 255.0
        mean = sample.mean(axis=(0, 1, 2))
        variance = np.maximum(sample.var(axis=(0, 1, 2)), 1e-6)
    return mean.astype("float32").tolist(), variance.astype("float32").tolist()


def keras_file_refusal(path: str) -> str | None:
    """Why ``model.path`` cannot be loaded, said before Keras is asked; None when it may load."""
    if not Path(path).is_file():
        return f"model.path: {path} does not exist"
    problem = keras_file_problem(path)
    return f"model.path: {problem}" if problem else None


def _load_keras_file(keras, path: str, input_shape: tuple[int, ...], num_classes: int):
    refused = keras_file_refusal(path)
    if refused:
        raise ModelError(refused)
    try:
        # safe_mode=True (the default, stated for the reader): never run a file's lambdas.
        model = keras.saving.load_model(path, compile=False, safe_mode=True)
    except Exception as exc:  # noqa: BLE001 - any load failure is a bad input file
        raise ModelError(f"model.path: cannot load {path}: {first_line(exc)}") from None
    want = tuple(model.input_shape[1:]) if not isinstance(model.input_shape, list) else None
    if want is None:
        raise ModelError(f"model.path: {path} has several inputs; Replica Studio trains single-input classifiers")
    if len(want) != len(input_shape) or any(w is not None and w != d for w, d in zip(want, input_shape)):
        raise ModelError(f"model.path: {path} takes inputs of shape {want}, the dataset has {tuple(input_shape)}")
    out = model.output_shape
    if isinstance(out, list) or out[-1] != num_classes:
        raise ModelError(f"model.path: {path} outputs {out}, the dataset has {num_classes} classes")
    return model


def outputs_logits(model) -> bool:
    """False when the model ends in a softmax (a user's .keras file may); then the loss must not
    apply one again."""
    import keras

    last = model.layers[-1]
    if isinstance(last, keras.layers.Softmax):
        return False
    activation = getattr(last, "activation", None)
    return getattr(activation, "__name__", "") != "softmax"


def describe(model) -> dict[str, Any]:
    """Parameter counts and a layer summary for the GUI and the run_started event."""
    import numpy as np

    def count(weights):
        return int(sum(np.prod(w.shape) for w in weights))

    layers = [{
        "name": layer.name,
        "type": type(layer).__name__,
        "output_shape": _output_shape(layer),
        "parameters": count(layer.weights),
    } for layer in model.layers]
    return {
        "name": model.name,
        "parameters": count(model.weights),
        "trainable_parameters": count(model.trainable_weights),
        "layers": layers,
    }


def _output_shape(layer) -> list | None:
    try:
        shape = layer.output.shape
    except (AttributeError, ValueError):
        return None
    return [None if d is None else int(d) for d in shape]
