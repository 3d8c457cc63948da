"""The parity check: does the exported file compute what the trained model computes?

The file is loaded back in its own runtime (:mod:`gui_app.engine.export.runtimes`), never
through the model in memory, and the same N test images go through both. We report the
largest absolute difference of any class probability, the fraction of images whose top-1
class agrees, and both models' accuracy on those images (what quantisation costs).

Float formats pass with a max abs diff <= 1e-5 (float16 weights: 1e-2, see formats.py);
int8 formats pass with a top-1 agreement >= 98 %.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from gui_app.core.export_result import ParityReport
from gui_app.core.formats import ExportFormat
from gui_app.engine.export.runtimes import BATCH, Runtime, scale_pixels


def compare(fmt: ExportFormat, runtime: str, probabilities: np.ndarray, reference: np.ndarray,
            labels: np.ndarray | None = None) -> ParityReport:
    """Judge ``probabilities`` (the exported file's) against ``reference`` (the trained model's)."""
    probabilities = np.asarray(probabilities, np.float64)
    reference = np.asarray(reference, np.float64)
    if probabilities.shape != reference.shape:
        return ParityReport(fmt.name, runtime, len(reference), float("inf"), float("inf"), 0.0, None, None,
                            f"output shape {probabilities.shape} differs from {reference.shape}", False)
    diff = np.abs(probabilities - reference)
    top1, ref_top1 = probabilities.argmax(axis=1), reference.argmax(axis=1)
    agreement = float(np.mean(top1 == ref_top1)) if len(reference) else 1.0
    max_diff = float(diff.max()) if diff.size else 0.0
    accuracy = reference_accuracy = None
    if labels is not None and len(labels):
        accuracy = float(np.mean(top1 == labels))
        reference_accuracy = float(np.mean(ref_top1 == labels))
    if fmt.max_abs_diff is not None:
        passed = bool(np.isfinite(max_diff) and max_diff <= fmt.max_abs_diff)
    else:  # a quantised format: judged by its top-1 agreement
        passed = fmt.min_top1_agreement is not None and agreement >= fmt.min_top1_agreement
    return ParityReport(fmt.name, runtime, len(reference), max_diff, float(diff.mean()) if diff.size else 0.0,
                        agreement, accuracy, reference_accuracy, fmt.criterion, passed)


def check_parity(fmt: ExportFormat, runtime: Runtime, images: np.ndarray, labels: np.ndarray | None,
                 reference: np.ndarray, cancel: Callable[[], None] | None = None) -> ParityReport:
    """Run ``images`` (uint8 NHWC) through ``runtime`` -- the exported file loaded back with
    :func:`~gui_app.engine.export.runtimes.open_runtime` -- and compare with ``reference``, the
    trained model's probabilities for the same images. ``cancel`` is called between batches
    and may raise to stop."""
    x = scale_pixels(images)
    parts = []
    for start in range(0, len(x), BATCH):
        if cancel is not None:
            cancel()
        parts.append(runtime(x[start:start + BATCH]))
    outputs = np.concatenate(parts) if parts else np.zeros_like(reference)
    return compare(fmt, runtime.runtime, outputs, reference, labels)
