"""The model card: ``<file name>.json`` beside every export.

It tells whoever deploys the file what goes in and what comes out -- class names in output
order, input shape, dtype and preprocessing -- and how far the file can be trusted: the run
config, test accuracy, library versions and the parity figures of its check. ``predict``
and the Try panel read it back for class names and preprocessing.

``model.tflite`` gets ``model.tflite.json`` (not ``model.json``) so that a ``.keras`` and a
``.tflite`` export of the same name in one folder keep a card each.
"""
from __future__ import annotations

import importlib.metadata
import json
import platform
import time
from pathlib import Path
from typing import Any

from gui_app.core.formats import INPUT_NAME, OUTPUT_NAME, PIXEL_SCALE, PREPROCESSING, ExportError, ExportFormat
from gui_app.core.json_values import finite_or_null
from gui_app.engine.export.parity import ParityReport
from gui_app.engine.export.runtimes import Runtime

CARD_SCHEMA_VERSION = 1
_RUNTIME_PACKAGES = {"keras": (), "tensorflow": (), "ai_edge_litert": ("ai-edge-litert",),
                     "onnxruntime": ("onnx", "tf2onnx", "onnxruntime")}


def card_path_for(export_path: str | Path) -> Path:
    export_path = Path(export_path)
    return export_path.with_name(export_path.name + ".json")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions(fmt: ExportFormat) -> dict[str, str | None]:
    found = {"tensorflow": _version("tensorflow"), "keras": _version("keras"), "numpy": _version("numpy"),
             "python": platform.python_version()}
    found.update({package: _version(package) for package in _RUNTIME_PACKAGES[fmt.runtime]})
    return found


def build_card(*, fmt: ExportFormat, export_path: Path, size_bytes: int, run_dir: Path,
               run_config: dict[str, Any], class_names: list[str], runtime: Runtime | None,
               input_shape: tuple[int, int, int], eval_info: dict[str, Any], parity: ParityReport | None,
               extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the card says, as a JSON-ready dict. ``runtime`` is the exported file loaded
    back (for its signatures and quantisation); ``None`` when the check was skipped."""
    h, w, c = input_shape
    in_q = runtime.input_quantization if runtime else None
    out_q = runtime.output_quantization if runtime else None
    return {
        "schema_version": CARD_SCHEMA_VERSION,
        "format": fmt.name,
        "format_label": fmt.label,
        "file": export_path.name,
        "size_bytes": size_bytes,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "run_dir": str(run_dir),
        "dataset": run_config.get("dataset", {}).get("name"),
        "class_names": list(class_names),
        "input": {
            "name": INPUT_NAME,
            "shape": [None, h, w, c],
            "layout": "NHWC",
            "dtype": "int8" if in_q else "float32",
            "color_mode": "grayscale" if c == 1 else "rgb",
            "quantization": {"scale": in_q[0], "zero_point": in_q[1]} if in_q else None,
        },
        "output": {
            "name": OUTPUT_NAME,
            "shape": [None, len(class_names)],
            "dtype": "int8" if out_q else "float32",
            "meaning": "class probabilities (softmax), in the order of class_names",
            "quantization": {"scale": out_q[0], "zero_point": out_q[1]} if out_q else None,
        },
        "preprocessing": {
            "description": _preprocessing(in_q),
            "scale": PIXEL_SCALE,
            "offset": 0.0,
            "resize": f"bilinear with antialiasing to {h}x{w}",
        },
        "quantization": fmt.quantization,
        "signatures": runtime.signatures if runtime else None,
        "test_accuracy": eval_info.get("accuracy"),
        "test_loss": eval_info.get("loss"),
        "test_examples": eval_info.get("examples"),
        "parity": parity.to_dict() if parity else None,
        "run_config": run_config,
        "versions": versions(fmt),
        **(extra or {}),
    }


def _preprocessing(input_quantization: tuple[float, int] | None) -> str:
    if not input_quantization:
        return PREPROCESSING
    scale, zero = input_quantization
    text = f"{PREPROCESSING}, then quantise: int8 = round(x / {scale:.9g}) {'-' if zero < 0 else '+'} {abs(zero)}"
    if abs(scale - PIXEL_SCALE) < 1e-9 and zero == -128:
        text += " (that is: int8 = uint8 pixel - 128)"
    return text


def write_card(path: Path, card: dict[str, Any]) -> None:
    path.write_text(json.dumps(finite_or_null(card), indent=2, allow_nan=False) + "\n", encoding="utf-8")


def export_sha256(path: str | Path) -> str:
    """SHA-256 of an export: the file, or every file of a folder (relative name and bytes, in
    name order) so that no graph or variable file can be swapped under a card."""
    import hashlib

    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        with open(file, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def verify_savedmodel(folder: Path, card: dict[str, Any] | None) -> str | None:
    """None when ``folder`` is a SavedModel we exported (its card's hash matches), else why not.

    Loading a SavedModel runs its graph (TensorFlow's security model treats it as running a
    program), so one of unknown origin is opened only when the user says so."""
    if card is None:
        return "it has no Replica Studio model card beside it"
    expected = card.get("sha256")
    if not isinstance(expected, str):
        return "its model card carries no hash (exported by an older version?)"
    if export_sha256(folder) != expected:
        return "its files do not match the hash in its model card (changed since export)"
    return None


def read_card(export_path: str | Path) -> dict[str, Any] | None:
    """The card beside ``export_path``; ``None`` when there is none; ExportError if unreadable."""
    path = card_path_for(export_path)
    if not path.is_file():
        return None
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ExportError(f"{path}: cannot read the model card ({exc})") from None
    except json.JSONDecodeError as exc:
        raise ExportError(f"{path}: the model card is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(card, dict) or not isinstance(card.get("class_names"), list):
        raise ExportError(f"{path}: not a Replica Studio model card (no class_names list)")
    return card
