"""FindingBanner: a strip over the run's tabs saying what ``replica-studio diagnose`` would say of
the run on screen -- a non-finite step, a stall -- in its own sentence (gui_app/core/diagnosis.py
words it; the banner never rewords it), with a Details… view of every finding and a button that
dismisses it.

It draws the run history's ``findings`` (gui_app/core/history/findings.py): for the live run they
come with its events (and the stall from :class:`~gui_app.ui.window.stall_watch.StallWatch`), for
an opened run from its events file. Dismissed, it stays hidden until a finding with another
sentence comes; another run on screen forgets the dismissal.
"""
from __future__ import annotations

import html

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from gui_app.core.answers import Finding
from gui_app.core.history import Part, RunHistory
from gui_app.ui.charts.plot import HIGHLIGHT_COLOR
from gui_app.ui.charts.run_view import RunView

TITLES = {"non_finite": "Non-finite values", "stall": "Stalled", "straggler": "Straggler"}


def finding_rows(f: Finding) -> list[tuple[str, str]]:
    """The figures of one finding for the Details view, (name, value), those it has."""
    if f.kind == "non_finite":
        norms = ", ".join(f"{int(s)}: {n:.3g}" for s, n in f.grad_norms or []) or "none recorded"
        rows = [("Step", str(f.step)),
                ("Replica", "none (the weights' check)" if f.replica is None else str(f.replica)),
                ("Worker", "—" if f.worker is None else str(f.worker)),
                ("Non-finite at that step", ", ".join(map(str, f.replicas or [])) or "—"),
                ("Went first", f.first or "—"),
                ("Gradient norm before it (step: norm)", norms),
                ("Grew", "—" if f.growth is None else f"{f.growth:.3g}x"),
                ("Learning rate", "—" if f.learning_rate is None else f"{f.learning_rate:g}"),
                ("Checkpoint kept", f.checkpoint or "none"),
                ("First non-finite layer (replayed)", f"{f.layer} ({(f.layer_part or '').replace('_', ' ')})"
                 if f.layer else "not replayed" if f.replayed is not True else "none (the loss itself)"),
                ("Examples non-finite alone", ", ".join(map(str, f.examples or [])) or "—")]
    elif f.kind == "stall" and f.workers is not None:  # a cluster's: its launcher watched the workers
        rows = [("Last step", str(f.since_step)), ("Seconds since", f"{f.seconds:.0f}"),
                ("A step group took recently", "—" if f.expected_seconds is None else f"{f.expected_seconds:.3g} s"),
                ("Holding the others up", "none stands out" if f.worker is None else f"worker {f.worker}"),
                ("Why", f.reason or "—")]
    elif f.kind == "stall":
        rows = [("Last step", str(f.since_step)), ("Seconds since", f"{f.seconds:.0f}"),
                ("A step group took recently", f"{f.expected_seconds:.3g} s"),
                ("Process", f"{f.pid} ({f.state or 'state unknown'})")]
    elif f.kind == "straggler":
        rows = [("Worker", str(f.worker)), ("Replica", str(f.replica)),
                ("Arrives at the all-reduce after the others", f"{f.late_ms:.0f} ms ({(f.share or 0):.0%} of a step)"),
                ("In steps", str(f.steps)), ("Cause", f.cause or "—")]
    else:
        rows = []
    return rows


def workers_html(f: Finding) -> str:
    """A cluster stall's workers: each one's state, phase, last step and the top of its stack
    (the one holding the others up in the highlight colour)."""
    parts = []
    for w in f.workers or []:
        name = f"Worker {w.get('worker')}" + (f" on {w['host']}" if w.get("host") else "")
        if w.get("worker") == f.worker:
            name = f"<span style='color:{HIGHLIGHT_COLOR}'>{html.escape(name)} (holds the others up)</span>"
        else:
            name = html.escape(name)
        state = w.get("state") or "?"
        if w.get("os_state"):
            state += f", {w['os_state']} in /proc"
        phase = w.get("phase") or "no report"
        held = f" for {w['phase_seconds']:.0f} s" if w.get("phase_seconds") else ""
        step = f", last step {w['last_step']}" if w.get("last_step") is not None else ""
        stack = "\n".join(w.get("stack") or []) or "(not sent: it answered no report, or was in this phase < 1 s)"
        parts.append(f"<h4>{name}</h4><p>{html.escape(state)}; {html.escape(phase)}{held}{html.escape(step)}"
                     f"{'; pid ' + str(w['pid']) if w.get('pid') else ''}</p><pre>{html.escape(stack)}</pre>")
    return "".join(parts)


def details_html(history: RunHistory) -> str:
    """Every finding of the run, its sentence and its figures, then the run's error."""
    findings = history.findings
    parts = []
    for f in findings.findings:
        rows = "".join(f"<tr><td><b>{html.escape(name)}</b></td><td>{html.escape(value)}</td></tr>"
                       for name, value in finding_rows(f))
        parts.append(f"<h3>{html.escape(TITLES.get(f.kind, f.kind))}</h3><p>{html.escape(f.message)}</p>"
                     f"<table cellspacing='6'>{rows}</table>{workers_html(f)}")
    if findings.error:
        parts.append(f"<h3>The run's error</h3><p>{html.escape(findings.error)}</p>")
    return "".join(parts) or "<p>Nothing wrong found.</p>"


class DetailsDialog(QDialog):
    def __init__(self, history: RunHistory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Diagnosis")
        self.text = QTextBrowser()
        self.text.setHtml(details_html(history))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(buttons)
        self.resize(640, 420)


class FindingBanner(QFrame, RunView):
    changed = Signal()  # shown, hidden or reworded

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("findingBanner")
        self.setStyleSheet(f"#findingBanner {{ border: 2px solid {HIGHLIGHT_COLOR}; border-radius: 4px; }}")
        self._dismissed: str | None = None  # the sentence dismissed
        self.details_dialog: DetailsDialog | None = None
        self.label = QLabel(wordWrap=True)  # wraps: a sentence of three lines never widens the window
        self.details_button = QPushButton("Details…")
        self.details_button.clicked.connect(self.show_details)
        self.dismiss_button = QPushButton("Dismiss")
        self.dismiss_button.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.details_button)
        layout.addWidget(self.dismiss_button)
        self.setVisible(False)
        self.set_history(RunHistory())

    def sentence(self) -> str:
        """The sentence on the banner: the first finding's ("" with none)."""
        findings = self.history.findings.findings
        return findings[0].message if findings else ""

    def dismiss(self) -> None:
        self._dismissed = self.sentence()
        self._redraw()

    def show_details(self) -> DetailsDialog:
        self.details_dialog = DetailsDialog(self.history, self)
        self.details_dialog.open()
        return self.details_dialog

    def _history_replaced(self) -> None:
        self._dismissed = None

    def _history_changed(self, changed: int) -> None:
        if changed & Part.FINDINGS:
            self._redraw()

    def _redraw(self) -> None:
        findings = self.history.findings.findings
        text = self.sentence()
        more = f" (and {len(findings) - 1} more: Details…)" if len(findings) > 1 else ""
        show = bool(text) and text != self._dismissed
        if findings:
            title = TITLES.get(findings[0].kind, findings[0].kind)
            self.label.setText(f"<b style='color:{HIGHLIGHT_COLOR}'>{title}:</b> {html.escape(text)}{more}")
        self.setVisible(show)
        self.changed.emit()
