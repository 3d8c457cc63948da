"""How each export format is written (the formats themselves: :mod:`gui_app.core.formats`).

Every export holds the same graph: the trained model with a softmax on top
(:func:`probability_model`), so whatever runs the file gets class PROBABILITIES, never
logits; TensorFlow-based files carry the signature ``serve`` (and Keras's alias
``serving_default``).

TensorFlow is imported inside the functions only (see :mod:`gui_app.engine.export.runtimes`).
"""
from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from gui_app.core.formats import (
    INPUT_NAME,
    OUTPUT_NAME,
    SIGNATURE,
    ConversionError,
    ExportCancelled,
    ExportError,
    ExportFormat,
)
from gui_app.engine.export.runtimes import import_tensorflow

# Calibration examples for full-integer quantisation, drawn at random from the training set.
REPRESENTATIVE_EXAMPLES = 200


def write_export(fmt: ExportFormat, model, path: Path, input_shape: tuple[int, int, int],
                 representative: Callable[[], Iterator[np.ndarray]] | None = None) -> dict[str, Any]:
    """Write ``model`` (from :func:`probability_model`, called at least once) to ``path`` in
    ``fmt``. ``representative`` yields single float32 images for full-integer calibration.
    Returns facts about the written file for the model card."""
    if fmt.name == "keras":
        model.save(str(path))
        return {}
    if fmt.name == "savedmodel":
        _write_saved_model(model, path, input_shape)
        return {}
    if fmt.name == "onnx":
        return _write_onnx(model, path, input_shape)
    return _write_tflite(fmt, model, path, input_shape, representative)


def _serving_spec(input_shape: tuple[int, int, int]):
    tf = import_tensorflow()
    return tf.TensorSpec((None, *input_shape), tf.float32, name=INPUT_NAME)


def _write_saved_model(model, path: Path, input_shape: tuple[int, int, int]) -> None:
    """``model.export`` names the output ``output_0``; an ExportArchive lets us name it."""
    import keras

    tf = import_tensorflow()
    archive = keras.export.ExportArchive()
    archive.track(model)

    @tf.function(input_signature=[_serving_spec(input_shape)])
    def serve(image):
        return {OUTPUT_NAME: model(image, training=False)}

    archive.add_endpoint(SIGNATURE, serve)
    archive.write_out(str(path), verbose=False)


def _write_tflite(fmt: ExportFormat, model, path: Path, input_shape: tuple[int, int, int],
                  representative: Callable[[], Iterator[np.ndarray]] | None) -> dict[str, Any]:
    tf = import_tensorflow()
    # Converting from our own SavedModel (rather than from_keras_model) keeps the signature
    # and tensor names, and prints nothing on stdout.
    with tempfile.TemporaryDirectory(prefix="replica-studio-export-") as tmp:
        saved = Path(tmp) / "savedmodel"
        _write_saved_model(model, saved, input_shape)
        converter = tf.lite.TFLiteConverter.from_saved_model(str(saved), signature_keys=[SIGNATURE])
        if fmt.name != "tflite":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if fmt.name == "tflite-fp16":
            converter.target_spec.supported_types = [tf.float16]
        elif fmt.name == "tflite-int8-full":
            if representative is None:
                raise ExportError("tflite-int8-full: needs representative training images")
            converter.representative_dataset = lambda: ([image[np.newaxis]] for image in representative())
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
        try:
            flatbuffer = converter.convert()
        except ExportCancelled:  # raised by representative() between calibration images
            raise
        except Exception as exc:  # ConverterError and friends: a failed conversion, reported
            raise ConversionError(f"{fmt.name}: the TensorFlow Lite converter failed: {_error_line(exc)}") from exc
    path.write_bytes(flatbuffer)
    return {}


def _write_onnx(model, path: Path, input_shape: tuple[int, int, int]) -> dict[str, Any]:
    """tf2onnx from our SavedModel, as ``python -m tf2onnx.convert --saved-model`` does it.

    Not ``model.export(format="onnx")``: it converts a traced function with
    ``tf2onnx.convert.from_function``, which turns every captured constant -- the mean and
    variance of a Normalization layer, as in our models -- into an extra graph input, so the
    file wants three inputs instead of one. The SavedModel route freezes them as constants and
    takes the input and output names from the ``serve`` signature.
    """
    import onnx
    import tf2onnx
    from tf2onnx import tf_loader

    _patch_tf2onnx_for_numpy2()
    with tempfile.TemporaryDirectory(prefix="replica-studio-export-") as tmp:
        saved = Path(tmp) / "savedmodel"
        _write_saved_model(model, saved, input_shape)
        try:
            graph_def, inputs, outputs, renames = tf_loader.from_saved_model(
                str(saved), None, None, signatures=[SIGNATURE], return_tensors_to_rename=True)
            graph_model, _ = tf2onnx.convert.from_graph_def(graph_def, input_names=inputs, output_names=outputs,
                                                            tensors_to_rename=renames)
        except Exception as exc:  # an op tf2onnx cannot convert
            raise ConversionError(f"onnx: tf2onnx could not convert the model: {_error_line(exc)}") from exc
    graph = graph_model.graph
    if [i.name for i in graph.input] != [INPUT_NAME] or [o.name for o in graph.output] != [OUTPUT_NAME]:
        raise ConversionError(f"onnx: expected one input {INPUT_NAME!r} and one output {OUTPUT_NAME!r}; got "
                              f"{[i.name for i in graph.input]} and {[o.name for o in graph.output]}")
    for value in (graph.input[0], graph.output[0]):  # tf2onnx calls the batch dimension "unk__NN"
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.checker.check_model(graph_model, full_check=True)
    onnx.save(graph_model, str(path))
    opsets = {entry.domain or "ai.onnx": entry.version for entry in graph_model.opset_import}
    return {"onnx_opset": opsets.get("ai.onnx")}


def _patch_tf2onnx_for_numpy2() -> None:
    """tf2onnx 1.17 predates numpy 2 in places (``np.object``, its constant folding). Keras
    patches it before its own ONNX export; we convert with the same tf2onnx, so we do too."""
    try:
        from keras.src.export.tf2onnx_lib import patch_tf2onnx
    except ImportError:  # a later Keras without it: tf2onnx then supports numpy 2 itself
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        patch_tf2onnx()


def _error_line(exc: BaseException) -> str:
    """The line of a converter's many-line message that says what went wrong."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line.lower()]
    return (errors or lines or [type(exc).__name__])[0][:300]
