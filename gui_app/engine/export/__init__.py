"""Export a finished run to every format people deploy, prove each file works, try it.

    from gui_app.engine.export import export_run, load_predictor
    result = export_run(run_dir, "tflite-int8", "digits-int8.tflite")   # check=256 test images
    result.passed, result.parity.summary(), result.card_path
    predictor = load_predictor("digits-int8.tflite")                     # reads its model card
    predictor.predict_files(["seven.png"])[0].top(5)

Formats: keras, savedmodel, tflite, tflite-fp16, tflite-int8, tflite-int8-full, onnx
(:data:`FORMATS`). Every export returns class probabilities and has a model card
``<file name>.json`` beside it. Nothing here imports TensorFlow until a function needs it.
"""
from gui_app.core.formats import (
                                  DEFAULT_CHECK,
                                  FORMATS,
                                  ConversionError,
                                  ExportCancelled,
                                  ExportError,
                                  ExportFormat,
                                  default_file_name,
                                  format_size,
                                  get_format,
)
from gui_app.engine.export.exporter import ExportResult, export_run
from gui_app.engine.export.model_card import card_path_for, read_card
from gui_app.engine.export.parity import ParityReport
from gui_app.engine.export.predict import Prediction, Predictor, image_from_bytes, load_predictor, read_image
from gui_app.engine.export.runtimes import detect_kind

__all__ = [
    "DEFAULT_CHECK", "FORMATS", "ConversionError", "ExportCancelled", "ExportError", "ExportFormat",
    "ExportResult", "ParityReport", "Prediction", "Predictor", "card_path_for", "default_file_name",
    "detect_kind", "export_run", "format_size", "get_format", "image_from_bytes", "load_predictor", "read_card",
    "read_image",
]
