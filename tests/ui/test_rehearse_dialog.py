"""Tools -> Rehearse preemption…: the dialog runs ``rehearse --json`` on the forms' configuration
(over the fake engine: the real command is tests/engine/test_rehearse.py) and shows the
certificate, an equivalent one and one that names its first difference; Cancel ends it."""
from __future__ import annotations

import pytest

from gui_app.core.config import RunConfig
from gui_app.ui.colors import ERROR_STYLE
from gui_app.ui.dialogs.rehearse import RehearseDialog

TIMEOUT_MS = 10_000


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


def test_an_equivalent_rehearsal_shows_its_certificate(qtbot, make_dialog):
    dialog = make_dialog(RunConfig())
    dialog.set_step(7)
    dialog.set_signal("TERM")
    assert not dialog._worker.isEnabled()  # one process: nothing but the run to signal
    command = dialog.command()
    assert command[command.index("--at") + 1] == "7" and command[command.index("--signal") + 1] == "TERM"
    assert "--worker" not in command and "--json" in command
    with qtbot.waitSignal(dialog.succeeded, timeout=TIMEOUT_MS) as got:
        dialog.start()
    assert got.args[0].equivalent and dialog.certificate is got.args[0]
    assert dialog._status.text() == "Equivalent: the resumed run is the uninterrupted one, 40 steps (bitwise)."
    text = dialog._text.toPlainText()
    assert text.startswith("EQUIVALENT: mirrored, SIGTERM at step 7, 40 steps compared (bitwise)")
    assert "interrupted after step 8, resumed from step 6" in text


def test_a_difference_is_an_answer_with_its_first_step(qtbot, make_dialog):
    """Exit 1 with a certificate is the rehearsal's answer, not a failure."""
    config = RunConfig().replace(strategy={"name": "multi_worker_mirrored", "workers": 3, "devices": []})
    dialog = make_dialog(config)
    assert dialog._worker.isEnabled() and dialog._worker.maximum() == 2
    dialog.set_step(13)
    dialog.set_worker(2)
    with qtbot.waitSignal(dialog.succeeded, timeout=TIMEOUT_MS) as got:
        dialog.start()
    cert = got.args[0]
    assert not cert.equivalent and cert.worker == 2 and cert.signal == "KILL"
    assert dialog._status.styleSheet() == ERROR_STYLE and dialog._status.text().startswith("Not equivalent")
    assert "first difference: step 14: batch of replica 0" in dialog._text.toPlainText()


def test_cancel_ends_the_rehearsal(qtbot, make_dialog, fake_engine):
    fake_engine.configure("wait")
    dialog = make_dialog(RunConfig())
    dialog.start()
    assert dialog.is_running() and not dialog._step.isEnabled()
    with qtbot.waitSignal(dialog.failed, timeout=TIMEOUT_MS) as failed:
        dialog.cancel()
    assert failed.args[0].startswith("Cancelled") and not dialog.is_running()
    assert dialog.certificate is None and dialog._step.isEnabled()
