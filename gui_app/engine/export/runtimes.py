"""Open an exported model in its own runtime, independent of any model in memory.

Keras files with ``keras.saving.load_model(safe_mode=True)``, SavedModels with
``tf.saved_model.load`` and their ``serve`` signature, ``.tflite`` files with
``ai_edge_litert`` (``tf.lite.Interpreter`` is deprecated) and ``.onnx`` files with
``onnxruntime``. Each :class:`Runtime` takes float32 images in [0, 1] and returns float32
outputs; int8 inputs and outputs of full-integer TFLite files are (de)quantised with the
scale and zero point stored in the file. The parity check and ``predict`` both use these.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gui_app.core import rundir
from gui_app.core.file_kinds import SAVED_MODEL_FILE, keras_file_problem, model_kind
from gui_app.core.formats import OUTPUT_NAME, PIXEL_SCALE, SIGNATURE, ExportError
from gui_app.core.messages import first_line

BATCH = 64  # images per call: bounded memory for big inputs, few calls for small ones

_tf_configured = False


def import_tensorflow():
    """``import tensorflow``, hiding the GPUs when this process has not started TensorFlow yet.

    Exports and predictions run in the GUI process or a short CLI process: on a GPU machine
    TensorFlow would otherwise take the GPU's memory and keep it until the window closes,
    starving the training runs the window starts. The CPU is plenty for a few hundred images,
    and reference and exported model then run on the same device.
    """
    global _tf_configured
    import tensorflow as tf

    if not _tf_configured:
        _tf_configured = True
        try:
            tf.config.set_visible_devices([], "GPU")
        except RuntimeError:  # the runtime already started (e.g. inside the engine): leave it
            pass
    return tf


def scale_pixels(images: np.ndarray, scale: float = PIXEL_SCALE, offset: float = 0.0) -> np.ndarray:
    """uint8 pixels -> the float32 input of the model (``pixels * scale + offset``)."""
    x = np.asarray(images).astype(np.float32)
    if scale == PIXEL_SCALE and offset == 0.0:
        return x / np.float32(255.0)  # the division the pipeline does, bit for bit
    return x * np.float32(scale) + np.float32(offset)


def detect_kind(path: str | Path) -> str:
    """``run`` (a run folder), ``keras``, ``savedmodel``, ``tflite`` or ``onnx``; an
    ExportError saying why when ``path`` is none of them."""
    path = Path(path)
    if not path.exists():
        raise ExportError(f"{path}: no such file or folder")
    kind = model_kind(path)
    if kind is not None:
        return kind
    if path.is_dir():
        if rundir.is_run_dir(path):
            raise ExportError(f"{path}: the run has no trained model ({rundir.MODEL_FILE}) yet")
        raise ExportError(f"{path}: neither a run folder nor a SavedModel folder (no {SAVED_MODEL_FILE})")
    raise ExportError(f"{path}: not a run folder, .keras file, SavedModel folder, .tflite or .onnx file")


class Runtime:
    """One loaded model. ``input_shape`` is (H, W, C) without the batch dimension."""

    runtime = ""
    input_shape: tuple[int, int, int]
    input_quantization: tuple[float, int] | None = None  # (scale, zero point) of an int input
    output_quantization: tuple[float, int] | None = None
    signatures: dict[str, Any] = {}

    def __call__(self, images: np.ndarray) -> np.ndarray:
        """float32 (N, H, W, C) in [0, 1] -> float32 (N, classes)."""
        images = np.asarray(images, dtype=np.float32)
        if images.shape[1:] != tuple(self.input_shape):
            raise ExportError(f"model: takes images of shape {tuple(self.input_shape)}; "
                              f"got {tuple(images.shape[1:])}")
        parts = [self._run(images[i:i + BATCH]) for i in range(0, len(images), BATCH)]
        return np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, 0), np.float32)

    def _run(self, batch: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def image_shape(shape: Any, where: str) -> tuple[int, int, int]:
    """(batch, H, W, C) with known H, W, C -> (H, W, C); ExportError otherwise."""
    def known(d: Any) -> int | None:
        try:
            return int(d) if d is not None and int(d) > 0 else None
        except (TypeError, ValueError):  # ONNX names symbolic dimensions ("height")
            return None

    dims = [known(d) for d in list(shape)[1:]]
    if len(dims) != 3 or None in dims:
        raise ExportError(f"{where}: expected one image input of shape (batch, height, width, channels); "
                          f"got {list(shape)}")
    return tuple(dims)  # type: ignore[return-value]


def load_keras_model(path: Path):
    import keras

    problem = keras_file_problem(path)
    if problem:
        raise ExportError(problem)
    import_tensorflow()
    try:
        # safe_mode=True (the default, stated for the reader): never run a file's lambdas.
        return keras.saving.load_model(str(path), compile=False, safe_mode=True)
    except Exception as exc:  # noqa: BLE001 - any load failure is a bad input file
        raise ExportError(f"{path}: cannot load the Keras model: {first_line(exc)}") from None


class KerasRuntime(Runtime):
    runtime = "keras"

    def __init__(self, path: Path, logits_to_probabilities: bool = False) -> None:
        model = load_keras_model(path)
        if isinstance(model.input_shape, list):
            raise ExportError(f"{path}: the model has several inputs; expected one image input")
        self.input_shape = image_shape(model.input_shape, str(path))
        if logits_to_probabilities:  # a run's model.keras outputs logits
            from gui_app.engine.export.probability import probability_model

            model = probability_model(model, self.input_shape)
        self.model = model
        self.signatures = {"keras": {"inputs": [t.name for t in model.inputs], "outputs": [model.layers[-1].name]}}

    def _run(self, batch: np.ndarray) -> np.ndarray:
        out = self.model(batch, training=False)
        return np.asarray(out[0] if isinstance(out, (list, tuple)) else out)


class SavedModelRuntime(Runtime):
    runtime = "tensorflow"

    def __init__(self, path: Path) -> None:
        tf = import_tensorflow()
        try:
            # Keep the loaded object: its signatures stop working once it is garbage collected.
            self._loaded = tf.saved_model.load(str(path))
        except Exception as exc:  # noqa: BLE001 - any load failure is a bad input file
            raise ExportError(f"{path}: cannot load the SavedModel: {first_line(exc)}") from None
        signatures = dict(self._loaded.signatures)
        name = SIGNATURE if SIGNATURE in signatures else next(iter(signatures), None)
        if name is None:
            raise ExportError(f"{path}: the SavedModel has no serving signature")
        self._fn = signatures[name]
        inputs = self._fn.structured_input_signature[1]
        outputs = self._fn.structured_outputs
        if len(inputs) != 1 or (len(outputs) != 1 and OUTPUT_NAME not in outputs):
            raise ExportError(f"{path}: signature {name!r} must take one image and return one output")
        (self._input_name, spec), = inputs.items()
        self._output_name = OUTPUT_NAME if OUTPUT_NAME in outputs else next(iter(outputs))
        self.input_shape = image_shape(spec.shape, str(path))
        self.signatures = {key: {"inputs": sorted(fn.structured_input_signature[1]),
                                 "outputs": sorted(fn.structured_outputs)} for key, fn in signatures.items()}
        self._tf = tf

    def _run(self, batch: np.ndarray) -> np.ndarray:
        return self._fn(**{self._input_name: self._tf.constant(batch)})[self._output_name].numpy()


class LiteRuntime(Runtime):
    runtime = "ai_edge_litert"

    def __init__(self, path: Path) -> None:
        from ai_edge_litert.interpreter import Interpreter

        try:
            self._interpreter = Interpreter(model_path=str(path))
        except (ValueError, RuntimeError) as exc:
            raise ExportError(f"{path}: not a valid TensorFlow Lite file "
                              f"({first_line(exc)})") from None
        inputs, outputs = self._interpreter.get_input_details(), self._interpreter.get_output_details()
        if len(inputs) != 1 or len(outputs) != 1:
            raise ExportError(f"{path}: expected one input and one output; got {len(inputs)} and {len(outputs)}")
        self._input, self._output = inputs[0], outputs[0]
        self.input_shape = image_shape(self._input["shape"], str(path))
        self.input_quantization = _quantization(self._input)
        self.output_quantization = _quantization(self._output)
        self.signatures = self._interpreter.get_signature_list()
        self._batch = 0

    def _run(self, batch: np.ndarray) -> np.ndarray:
        if len(batch) != self._batch:  # shape_signature has a -1 batch: resize, then allocate
            self._interpreter.resize_tensor_input(self._input["index"], [len(batch), *self.input_shape])
            self._interpreter.allocate_tensors()
            self._batch = len(batch)
        if self.input_quantization:
            scale, zero = self.input_quantization
            info = np.iinfo(self._input["dtype"])
            batch = np.clip(np.round(batch / scale + zero), info.min, info.max).astype(self._input["dtype"])
        self._interpreter.set_tensor(self._input["index"], batch)
        self._interpreter.invoke()
        out = self._interpreter.get_tensor(self._output["index"])
        if self.output_quantization:
            scale, zero = self.output_quantization
            out = (out.astype(np.float32) - zero) * scale
        return out


def _quantization(detail: dict) -> tuple[float, int] | None:
    if np.dtype(detail["dtype"]).kind not in "iu":
        return None
    scale, zero = detail["quantization"]
    return float(scale), int(zero)


class OnnxRuntime(Runtime):
    runtime = "onnxruntime"

    def __init__(self, path: Path) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3  # errors only: no graph-optimisation chatter
        try:
            self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
            raise ExportError(f"{path}: not a valid ONNX model ({first_line(exc)})") from None
        inputs, outputs = self._session.get_inputs(), self._session.get_outputs()
        if len(inputs) != 1 or len(outputs) != 1:
            raise ExportError(f"{path}: expected one input and one output; got {len(inputs)} and {len(outputs)}")
        self._input_name, self._output_name = inputs[0].name, outputs[0].name
        self.input_shape = image_shape(inputs[0].shape, str(path))
        self.signatures = {"onnx": {"inputs": [self._input_name], "outputs": [self._output_name],
                                    "batch_dimension": inputs[0].shape[0]}}

    def _run(self, batch: np.ndarray) -> np.ndarray:
        return self._session.run([self._output_name], {self._input_name: batch})[0]


def open_runtime(path: str | Path, kind: str | None = None) -> Runtime:
    """Load ``path`` in its own runtime. A run folder loads its model.keras with a softmax added."""
    path = Path(path)
    kind = kind or detect_kind(path)
    if kind == "run":
        return KerasRuntime(path / rundir.MODEL_FILE, logits_to_probabilities=True)
    if kind == "keras":
        return KerasRuntime(path)
    if kind == "savedmodel":
        return SavedModelRuntime(path)
    if kind == "tflite":
        return LiteRuntime(path)
    if kind == "onnx":
        return OnnxRuntime(path)
    raise ExportError(f"{path}: unknown model kind {kind!r}")
