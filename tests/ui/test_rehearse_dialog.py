"""Tools -> Rehearse preemption…: the dialog runs ``rehearse --json`` on the forms' configuration
(over the fake engine: the real command is tests/engine/test_rehearse.py) and shows the
certificate, an equivalent one and one that names its first difference, with both runs' curves
overlaid (run folders written here, read off the GUI thread); Cancel ends it."""
from __future__ import annotations

import numpy as np
import pytest
from compared_runs import write_run

from gui_app.core.config import RunConfig
from gui_app.ui.colors import ERROR_STYLE
from gui_app.ui.dialogs.rehearse import RehearseDialog

TIMEOUT_MS = 10_000
STEPS = 40


@pytest.fixture
def rehearsed_runs(tmp_path, monkeypatch):
    """The fake engine's certificate names these folders: a reference of 40 steps and a rehearsed
    run resumed after step 6, the same losses unless ``lr`` differs (loss = lr * 100 / step + 1)."""

    def write(lr: float = 0.1, steps: int = STEPS):
        reference = write_run(tmp_path / "reference", lr=0.1, seed=1, val=0.9, test=0.9, steps=STEPS)
        rehearsed = write_run(tmp_path / "rehearsed", lr=lr, seed=1, val=0.9, test=0.9, steps=steps, resumed_at=6)
        monkeypatch.setenv("FAKE_ENGINE_REFERENCE_RUN", str(reference))
        monkeypatch.setenv("FAKE_ENGINE_REHEARSED_RUN", str(rehearsed))

    return write


def drawn(dialog: RehearseDialog) -> list[tuple[np.ndarray, np.ndarray]]:
    dialog.chart.flush()
    return [curve.line.getData() for curve in dialog.chart.curves]


@pytest.fixture
def make_dialog(qtbot, fake_engine):
    made = []

    def make(config: RunConfig) -> RehearseDialog:
        dialog = RehearseDialog(config, engine_command=fake_engine)
        qtbot.addWidget(dialog)
        made.append(dialog)
        return dialog

    yield make
    for dialog in made:
        dialog.shutdown()


def test_an_equivalent_rehearsal_shows_its_certificate(qtbot, make_dialog, rehearsed_runs):
    rehearsed_runs()
    dialog = make_dialog(RunConfig())
    dialog.set_step(7)
    dialog.set_signal("TERM")
    assert not dialog._worker.isEnabled()  # one process: nothing but the run to signal
    command = dialog.command()
    assert command[command.index("--at") + 1] == "7" and command[command.index("--signal") + 1] == "TERM"
    assert "--worker" not in command and "--json" in command
    with qtbot.waitSignal(dialog.succeeded, timeout=TIMEOUT_MS) as got, \
            qtbot.waitSignal(dialog.curves_shown, timeout=TIMEOUT_MS):
        dialog.start()
    assert got.args[0].equivalent and dialog.certificate is got.args[0]
    assert dialog._status.text() == "Equivalent: the resumed run is the uninterrupted one, 40 steps (bitwise)."
    text = dialog._text.toPlainText()
    assert text.startswith("EQUIVALENT: mirrored, SIGTERM at step 7, 40 steps compared (bitwise)")
    assert "interrupted after step 8, resumed from step 6" in text
    assert dialog.chart.isVisibleTo(dialog) and not dialog._curves_note.isVisibleTo(dialog)
    (ref_x, ref_y), (reh_x, reh_y) = drawn(dialog)
    assert list(ref_x) == list(reh_x) == list(range(1, STEPS + 1))
    assert ref_y[0] == pytest.approx(11.0) and ref_y[-1] == pytest.approx(10 / STEPS + 1)
    assert np.array_equal(ref_y, reh_y)
    marks = dialog.chart.marks
    assert sorted(marks) == ["resumed", "stopped"]  # equivalent: no difference to mark
    assert (marks["stopped"].value(), marks["resumed"].value()) == (8, 6)


def test_a_difference_is_an_answer_with_its_first_step(qtbot, make_dialog, rehearsed_runs):
    """Exit 1 with a certificate is the rehearsal's answer, not a failure; the chart marks the step."""
    rehearsed_runs(lr=0.2, steps=30)
    config = RunConfig().replace(strategy={"name": "multi_worker_mirrored", "workers": 3, "devices": []})
    dialog = make_dialog(config)
    assert dialog._worker.isEnabled() and dialog._worker.maximum() == 2
    dialog.set_step(13)
    dialog.set_worker(2)
    with qtbot.waitSignal(dialog.succeeded, timeout=TIMEOUT_MS) as got, \
            qtbot.waitSignal(dialog.curves_shown, timeout=TIMEOUT_MS):
        dialog.start()
    cert = got.args[0]
    assert not cert.equivalent and cert.worker == 2 and cert.signal == "KILL"
    assert dialog._status.styleSheet() == ERROR_STYLE and dialog._status.text().startswith("Not equivalent")
    assert "first difference: step 14: batch of replica 0" in dialog._text.toPlainText()
    (ref_x, ref_y), (reh_x, reh_y) = drawn(dialog)
    assert (len(ref_x), len(reh_x)) == (STEPS, 30)
    assert reh_y[0] == pytest.approx(2 * ref_y[0] - 1)
    marks = dialog.chart.marks
    assert (marks["stopped"].value(), marks["resumed"].value(), marks["differs"].value()) == (14, 12, 14)


def test_runs_that_cannot_be_read_leave_the_certificate_and_say_so(qtbot, make_dialog):
    """The certificate names folders that are gone (deleted since): no chart, one line why."""
    dialog = make_dialog(RunConfig())
    with qtbot.waitSignal(dialog.curves_shown, timeout=TIMEOUT_MS):
        dialog.start()
    assert dialog.certificate is not None and dialog._status.text().startswith("Equivalent")
    assert not dialog.chart.isVisibleTo(dialog) and dialog._curves_note.isVisibleTo(dialog)
    assert dialog._curves_note.text().startswith("The curves cannot be shown: /runs/a")


def test_cancel_ends_the_rehearsal(qtbot, make_dialog, fake_engine):
    fake_engine.configure("wait")
    dialog = make_dialog(RunConfig())
    dialog.start()
    assert dialog.is_running() and not dialog._step.isEnabled()
    with qtbot.waitSignal(dialog.failed, timeout=TIMEOUT_MS) as failed:
        dialog.cancel()
    assert failed.args[0].startswith("Cancelled") and not dialog.is_running()
    assert dialog.certificate is None and dialog._step.isEnabled()


def test_the_worker_of_a_cluster_on_ssh_hosts_can_be_signalled(make_dialog):
    """The chief here and worker 1 on an SSH host: both are the run's to signal (over ssh there)."""
    config = RunConfig.from_dict({"strategy": {"name": "multi_worker_mirrored", "devices": [],
                                               "cluster": ["10.0.0.1:2222", {"host": "gpu2", "port": 2222}]}})
    dialog = make_dialog(config)
    assert dialog._worker.isEnabled() and dialog._worker.maximum() == 1
    dialog.set_worker(1)
    command = dialog.command()
    assert command[command.index("--worker") + 1] == "1"
    slurm = make_dialog(config.replace(strategy={"cluster": "slurm"}))
    assert not slurm._worker.isEnabled()  # the scheduler starts its workers
