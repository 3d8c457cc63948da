"""What an export is, without TensorFlow: the formats, their pass criteria, the names of the
exported graph's input and output, and the errors an export or a prediction raises.

The window needs all of this (the Export menu, the dialog's file names, reading an export's
JSON result) and must never import TensorFlow, so it lives here; the writers, the runtimes
and the parity check in :mod:`gui_app.engine.export` build on it.

Every export holds the trained model with a softmax on top, so whatever runs the file gets
class PROBABILITIES: float32 NHWC input in [0, 1] (uint8 pixels divided by 255) named
``image``, output named ``probabilities``, TensorFlow-based files with the signature
``serve``. The full-integer TFLite file is the exception: int8 input and output, quantised
with the scale and zero point stored in the file and the model card.
"""
from __future__ import annotations

from dataclasses import dataclass

INPUT_NAME = "image"
OUTPUT_NAME = "probabilities"
SIGNATURE = "serve"
# The preprocessing every model of a run expects, as the training pipeline does it.
PIXEL_SCALE = 1.0 / 255.0
PREPROCESSING = "divide uint8 pixels by 255 (float32 input in [0, 1])"
DEFAULT_CHECK = 256  # test images the parity check compares
# Loading a SavedModel runs its graph (TensorFlow's security model: a program): one without our
# model card, or whose files no longer match the card's hash, loads only with this flag.
UNVERIFIED_SAVEDMODEL_FLAG = "--allow-unverified-savedmodel"

# float16 keeps 11 significant bits, so every weight moves by up to 2**-11 (4.9e-4) of itself
# and the errors add up through the layers. Measured on this machine (models trained briefly):
# 3e-5 (mnist_cnn) to 3.9e-3 (resnet20) max abs difference in probability. 1e-2 leaves room for
# deeper models and is still far below a difference anybody reading the probabilities would notice.
FP16_MAX_ABS_DIFF = 1e-2
FLOAT_MAX_ABS_DIFF = 1e-5
INT8_MIN_TOP1_AGREEMENT = 0.98


class ExportError(ValueError):
    """An export or a prediction cannot be done; the one-line message names the file or key."""


class ExportCancelled(Exception):
    """The user cancelled; whatever was half written has been removed."""


class ConversionError(ExportError):
    """The input was fine but a converter (TFLite, tf2onnx) could not express the model."""


@dataclass(frozen=True)
class ExportFormat:
    name: str
    label: str  # what the Export menu shows
    suffix: str  # file name ending; "" for a folder
    runtime: str  # the runtime the parity check loads it with
    quantization: str | None = None
    max_abs_diff: float | None = None  # pass criterion of float formats
    min_top1_agreement: float | None = None  # pass criterion of quantised int8 formats

    @property
    def is_directory(self) -> bool:
        return not self.suffix

    @property
    def kind(self) -> str:
        """The model kind of the written file (:func:`gui_app.core.file_kinds.model_kind`):
        tflite-fp16 is a tflite."""
        return self.name.split("-", 1)[0]

    @property
    def criterion(self) -> str:
        if self.max_abs_diff is not None:
            return f"max abs diff <= {self.max_abs_diff:g}"
        return f"top-1 agreement >= {self.min_top1_agreement:.0%}"


FORMATS: dict[str, ExportFormat] = {f.name: f for f in (
    ExportFormat("keras", "Keras (.keras)", ".keras", "keras", max_abs_diff=FLOAT_MAX_ABS_DIFF),
    ExportFormat("savedmodel", "TensorFlow SavedModel (folder)", "", "tensorflow", max_abs_diff=FLOAT_MAX_ABS_DIFF),
    ExportFormat("tflite", "TensorFlow Lite, float32 (.tflite)", ".tflite", "ai_edge_litert",
                 max_abs_diff=FLOAT_MAX_ABS_DIFF),
    ExportFormat("tflite-fp16", "TensorFlow Lite, float16 weights (.tflite)", ".tflite", "ai_edge_litert",
                 quantization="float16 weights", max_abs_diff=FP16_MAX_ABS_DIFF),
    ExportFormat("tflite-int8", "TensorFlow Lite, dynamic-range int8 (.tflite)", ".tflite", "ai_edge_litert",
                 quantization="dynamic-range int8 (int8 weights, float32 input and output)",
                 min_top1_agreement=INT8_MIN_TOP1_AGREEMENT),
    ExportFormat("tflite-int8-full", "TensorFlow Lite, full-integer int8 (.tflite)", ".tflite", "ai_edge_litert",
                 quantization="full-integer int8 (int8 weights, activations, input and output; "
                              "calibrated on training images)",
                 min_top1_agreement=INT8_MIN_TOP1_AGREEMENT),
    ExportFormat("onnx", "ONNX (.onnx)", ".onnx", "onnxruntime", max_abs_diff=FLOAT_MAX_ABS_DIFF),
)}


def get_format(name: str) -> ExportFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ExportError(f"format: must be one of {', '.join(FORMATS)}; got {name!r}") from None


def default_file_name(fmt: ExportFormat, stem: str) -> str:
    """``<stem>.keras``, ``<stem>-fp16.tflite``, ``<stem>_savedmodel``: formats that share a
    suffix get distinct names so exporting all of them into one folder overwrites nothing."""
    if fmt.is_directory:
        return f"{stem}_savedmodel"
    variant = fmt.name.split("-", 1)[1] if "-" in fmt.name else ""
    return f"{stem}-{variant}{fmt.suffix}" if variant else f"{stem}{fmt.suffix}"


def format_size(size: int) -> str:
    """``812 bytes``, ``45.9 kB``, ``12.3 MB``."""
    if size < 1000:
        return f"{size} bytes"
    return f"{size / 1e3:.1f} kB" if size < 1e6 else f"{size / 1e6:.1f} MB"
