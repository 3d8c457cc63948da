"""The test set's figures at the end of a run (and of ``replica-studio evaluate``): the ``eval``
event, ``eval.json`` (its fields) and ``misclassified.npz`` (the first wrong predictions, with
their images)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gui_app.core import atomic_io, rundir
from gui_app.core.events import Eval, encode
from gui_app.engine.run.event_writer import EventWriter
from gui_app.engine.training.inputs import InputSource

MISCLASSIFIED_KEEP = 64


def evaluate_test_set(evaluator, source: InputSource, run_dir: Path, events: EventWriter) -> Eval:
    """Distributed evaluation on the test set; writes eval.json and misclassified.npz, emits ``eval``."""
    result = evaluator.evaluate(source.test(evaluator.strategy), keep_predictions=True)
    event = result.to_event(source.class_names)
    figures = {key: value for key, value in encode(event).items() if key not in ("type", "time")}
    atomic_io.write_text(run_dir / rundir.EVAL_FILE, json.dumps(figures))
    if result.predictions is not None:
        wrong = np.flatnonzero(result.predictions != result.labels)[:MISCLASSIFIED_KEEP]
        with atomic_io.atomic_path(run_dir / rundir.MISCLASSIFIED_FILE) as tmp:
            np.savez_compressed(tmp, x=source.test_images(wrong), y_true=result.labels[wrong],
                                y_pred=result.predictions[wrong], confidence=result.confidence[wrong], index=wrong)
    events.emit(event)
    return event
