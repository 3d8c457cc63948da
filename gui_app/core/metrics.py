"""Figures derived from an evaluation's confusion matrix: numpy only, so the engine (which
writes them into the ``eval`` event) and the window (which recomputes them for an old
``eval.json``) share one definition."""
from __future__ import annotations

import numpy as np


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
