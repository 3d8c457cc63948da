"""A run as one self-contained HTML file (``replica-studio report``, File -> Save report…):
what the window shows of it -- the summary, the training curves, the replicas, the step-time
split, the evaluation with a few misclassified images, the exports, the config, the versions
and what went wrong -- for someone without the app. Nothing is fetched: the charts are inline
SVG drawn here (gui_app/core/report/svg.py), the images ``data:`` URIs, the style inline.
Qt-free and TensorFlow-free; docs/report.md says what the page holds.
"""
from __future__ import annotations

import time
from pathlib import Path

from gui_app import __version__
from gui_app.core import atomic_io
from gui_app.core.report import result_sections, run_sections
from gui_app.core.report.page import page
from gui_app.core.report.record import RunRecord, read_record

REPORT_FILE = "report.html"  # the default: beside the run's own files

__all__ = ["REPORT_FILE", "RunRecord", "build_report", "read_record", "write_page", "write_report"]


def build_report(run_dir: str | Path) -> str:
    """The page of the run in ``run_dir``; ValueError (one line) when it is not a run folder."""
    record = read_record(run_dir)
    config = record.config
    subtitle = (f"{config.get('dataset', {}).get('name', '?')} · {config.get('model', {}).get('name', '?')} · "
                f"{record.strategy} · {record.history.status.status}")
    sections = [run_sections.summary(record), result_sections.diagnosis(record), run_sections.training(record),
                run_sections.replicas(record), run_sections.step_time(record), result_sections.evaluation(record),
                result_sections.exports(record), result_sections.config(record), result_sections.versions(record)]
    footer = (f"Written by Replica Studio {__version__} on {time.strftime('%Y-%m-%d %H:%M')} from "
              f"{record.run_dir.name}. One file: it loads nothing from the network.")
    return page(record.run_dir.name, subtitle, sections, footer)


def write_report(run_dir: str | Path, output: str | Path | None = None) -> Path:
    """Write the page (atomically) to ``output`` (default: ``RUN_DIR/report.html``); where it went.
    ValueError for a folder that is not a run or an output that cannot be written."""
    run_dir = Path(run_dir).expanduser()
    target = Path(output).expanduser() if output else run_dir / REPORT_FILE
    if target.is_dir():
        raise ValueError(f"{target} is a folder; name the HTML file to write")
    write_page(target, build_report(run_dir))
    return target


def write_page(target: Path, text: str) -> None:
    """``text`` written atomically to ``target``; ValueError (one line) when it cannot be."""
    try:
        atomic_io.write_text(target, text, durable=False)
    except OSError as exc:
        raise ValueError(f"cannot write {target}: {exc.strerror or exc}") from None
