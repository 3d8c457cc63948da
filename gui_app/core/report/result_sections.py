"""The report's parts about what the run produced and how it was set up: the evaluation
(test figures, per-class precision/recall/F1, the confusion matrix, a few misclassified images
inside the page), the exports kept in the folder with their parity figures, the config, the
versions, and what went wrong (warnings, errors, unreadable files)."""
from __future__ import annotations

import json
import math
from html import escape

import numpy as np

from gui_app.core.metrics import per_class_metrics
from gui_app.core.overrides import flatten
from gui_app.core.report.page import facts, note, section, table
from gui_app.core.report.png import data_uri
from gui_app.core.report.record import RunRecord
from gui_app.core.wording import label

GALLERY = 16  # misclassified images shown
MATRIX_CLASSES = 30  # up to this many classes the whole confusion matrix is shown
CONFUSED_PAIRS = 20


def _percent(value: float | None) -> str:
    return f"{value:.2%}" if isinstance(value, (int, float)) and math.isfinite(value) else ""


def evaluation(record: RunRecord) -> str:
    ev = record.history.evaluation
    if ev is None:
        return ""
    matrix = np.asarray(ev.confusion_matrix or [[]], dtype=np.int64)
    square = matrix.ndim == 2 and matrix.shape[0] == matrix.shape[1] and matrix.size > 0
    names = [str(n) for n in ev.class_names] if ev.class_names else [str(i) for i in range(len(matrix))]
    parts = [facts([("Test accuracy", _percent(ev.accuracy)),
                    ("Test loss", f"{ev.loss:.4f}" if ev.loss is not None else ""),
                    ("Examples", f"{ev.examples:,}" if ev.examples else ""),
                    ("Per replica", ", ".join(f"{n:,}" for n in ev.examples_per_replica)),
                    ("Evaluated at", f"{ev.examples_per_sec:,.0f} examples/s" if ev.examples_per_sec else "")])]
    rows = ([[str(c.index), c.name, f"{c.precision or 0:.3f}", f"{c.recall or 0:.3f}", f"{c.f1 or 0:.3f}",
              f"{c.support:,}"] for c in ev.per_class] if ev.per_class else
            [[str(r["class"]), r["name"], f"{r['precision']:.3f}", f"{r['recall']:.3f}", f"{r['f1']:.3f}",
              f"{r['support']:,}"] for r in per_class_metrics(matrix, names)] if square and len(names) == len(matrix)
            else [])
    if rows:
        parts.append("<h3>Per class</h3>" + table(["#", "Class", "Precision", "Recall", "F1", "Support"], rows,
                                                  text_columns=(1,)))
    if square and len(names) == len(matrix) and len(matrix) <= MATRIX_CLASSES:
        parts.append("<h3>Confusion matrix</h3>" + note("Rows: the true class; columns: the predicted one.")
                     + _confusion(matrix, names))
    elif square and len(names) == len(matrix):  # 100 classes: 10,000 cells would be most of the page
        said = note(f"{len(matrix)} classes: the {CONFUSED_PAIRS} commonest mistakes instead of the whole matrix.")
        parts.append(f"<h3>Most confused</h3>{said}{_confused(matrix, names)}")
    parts.append(_gallery(record, names))
    return section("Evaluation", "".join(parts), "evaluation")


def _confusion(matrix: np.ndarray, names: list[str]) -> str:
    """The matrix as a table, each cell shaded by its share of its row (the true class)."""
    rows_total = np.maximum(matrix.sum(axis=1, keepdims=True), 1)
    head = "".join(f"<th>{escape(n)}</th>" for n in names)
    body = []
    for i, row in enumerate(matrix):
        cells = []
        for j, count in enumerate(row):
            share = float(count) / float(rows_total[i, 0])
            hue = "31,119,180" if i == j else "214,39,40"
            ink = "#fff" if share > 0.6 else "inherit"
            cells.append(f'<td style="background:rgba({hue},{share:.2f});color:{ink}">{count:,}</td>')
        body.append(f"<tr><th>{escape(names[i])}</th>{''.join(cells)}</tr>")
    return (f'<div class="scroll"><table class="confusion"><thead><tr><th></th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def _confused(matrix: np.ndarray, names: list[str]) -> str:
    off = matrix.astype(np.int64).copy()
    np.fill_diagonal(off, 0)
    order = np.argsort(off, axis=None)[::-1][:CONFUSED_PAIRS]
    rows_total = np.maximum(matrix.sum(axis=1), 1)
    rows = [[names[i], names[j], f"{off[i, j]:,}", f"{off[i, j] / rows_total[i]:.1%}"]
            for i, j in (np.unravel_index(k, off.shape) for k in order) if off[i, j] > 0]
    return table(["True class", "Predicted", "Images", "Of the class"], rows, text_columns=(0, 1))


def _gallery(record: RunRecord, names: list[str]) -> str:
    wrong = record.misclassified
    if wrong is None or not len(wrong["x"]):
        return ""

    def name(i: int) -> str:
        return names[i] if 0 <= i < len(names) else str(i)

    cells = []
    for k in range(min(GALLERY, len(wrong["x"]))):
        true, predicted, confidence = int(wrong["y_true"][k]), int(wrong["y_pred"][k]), float(wrong["confidence"][k])
        sure = f" ({confidence:.0%})" if math.isfinite(confidence) else ""
        caption = f"true {name(true)}, predicted {name(predicted)}{sure}"
        cells.append(f'<figure><img src="{data_uri(wrong["x"][k])}" alt="{escape(caption)}">'
                     f'<figcaption>{escape(caption)}</figcaption></figure>')
    shown = f"{len(cells)} of {len(wrong['x'])}" if len(wrong["x"]) > len(cells) else f"{len(cells)}"
    return f'<h3>Misclassified test images ({shown})</h3><div class="gallery">{"".join(cells)}</div>'


def exports(record: RunRecord) -> str:
    if not record.cards:
        return ""
    rows = []
    for card in record.cards:
        parity = card.get("parity") or {}
        rows.append([str(card.get("file", "")), str(card.get("format_label") or card.get("format", "")),
                     f"{card['size_bytes'] / 1e6:,.2f} MB" if isinstance(card.get("size_bytes"), int) else "",
                     _percent(parity.get("accuracy")), _percent(parity.get("top1_agreement")),
                     f"{parity['max_abs_diff']:.2e}" if isinstance(parity.get("max_abs_diff"), (int, float)) else "",
                     ("pass" if parity.get("passed") else "FAIL") if parity else "not checked",
                     str(parity.get("criterion", ""))])
    return section("Exports", note("The model cards kept in the run folder.") + table(
        ["File", "Format", "Size", "Accuracy", "Top-1 agreement", "Max abs diff", "Parity", "Criterion"], rows,
        text_columns=(0, 1, 7)), "exports")


def config(record: RunRecord) -> str:
    rows = [[label(key), key, json.dumps(value) if not isinstance(value, str) else value]
            for key, value in flatten({k: v for k, v in record.config.items() if isinstance(v, dict)}).items()]
    raw = json.dumps(record.config, indent=2)
    return section("Configuration", table(["Setting", "Key", "Value"], rows, text_columns=(0, 1, 2))
                   + f"<details><summary>config.json</summary><pre>{escape(raw)}</pre></details>", "config")


def versions(record: RunRecord) -> str:
    started = record.history.started
    found = dict(started.versions) if started else {}
    return section("Versions", facts((str(k), str(v)) for k, v in found.items() if v is not None), "versions")


def diagnosis(record: RunRecord) -> str:
    """What went wrong or was warned about, in the run's own words."""
    lines = [f"{kind}: {text}" for kind, text in record.messages] + record.problems
    status = record.history.status
    if status.status in ("failed", "interrupted") and not any(k == "error" for k, _ in record.messages):
        lines.insert(0, f"{status.status}" + (f": {status.message}" if status.message else ""))
    if not lines:
        return ""
    items = "".join(f'<li class="warn">{escape(line)}</li>' for line in lines[:50])
    more = note(f"and {len(lines) - 50} more") if len(lines) > 50 else ""
    return section("Diagnosis", f"<ul>{items}</ul>{more}", "diagnosis")
