"""Figures the engine and the window both derive: numpy only, so they share one definition --
per-class figures of an evaluation's confusion matrix (written into the ``eval`` event, and
recomputed by the window for an old ``eval.json``), and means that may have nothing to average.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def mean_or_none(values: Sequence[float]) -> float | None:
    """The mean of ``values``; None when there are none (a figure no step reported)."""
    return float(np.mean(values)) if len(values) else None


def per_class_metrics(cm: np.ndarray, class_names: list[str]) -> list[dict]:
    """Precision, recall, F1 and support per class; rows of ``cm`` are the true classes.
    A class never predicted (or never present) gets 0, not NaN."""
    cm = np.asarray(cm, dtype=np.float64)
    tp = np.diag(cm)
    predicted, actual = cm.sum(axis=0), cm.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(predicted > 0, tp / predicted, 0.0)
        recall = np.where(actual > 0, tp / actual, 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
    return [{"class": i, "name": class_names[i], "precision": float(precision[i]), "recall": float(recall[i]),
             "f1": float(f1[i]), "support": int(actual[i])} for i in range(len(cm))]
