"""The window's diagnosis of the run on screen (gui_app/core/history/findings.py), folded from the
events as they arrive: the same findings, in the same words, as ``diagnose`` reads from the run's
folder (tests/core/test_diagnosis.py writes them the same way), with the events it keeps bounded."""
from __future__ import annotations

import os
import socket

from test_diagnosis import T0, _failed, _run, _step

from gui_app.core import diagnosis
from gui_app.core.events import EpochEnd, Paused, Step
from gui_app.core.history import Part, RunHistory
from gui_app.core.live_runs import RunProcess
from gui_app.core.rundir import CHECKPOINT_DIR, read_history


def test_a_long_run_s_non_finite_finding_is_diagnose_s_own(tmp_path):
    events = [*[_step(n, (1.0, 1.0)) for n in range(1, 300)], EpochEnd(time=T0 + 300, epoch=1, step=299),
              *[_step(n, (10.0 ** (n - 299), 1.0)) for n in range(300, 306)],
              *_failed(306, first="loss", replica=0, replicas=[0], checkpoint="/elsewhere/checkpoints/ckpt-300")]
    run = _run(tmp_path, events)
    (run / CHECKPOINT_DIR).mkdir()
    (run / CHECKPOINT_DIR / "ckpt-300.index").write_bytes(b"")
    history = read_history(run)  # as the window opens a run: its whole events file folded
    (expected,) = diagnosis.diagnose(run).findings
    assert history.findings.findings == [expected] and expected.step == 306
    assert expected.checkpoint == str(run / CHECKPOINT_DIR / "ckpt-300")  # in the run's folder, where it is now
    assert history.findings.error == "the loss became NaN"
    kept = [e.step for e in history.findings._events if isinstance(e, Step)]
    assert len(kept) <= 2 * diagnosis.STEP_WINDOW and 298 in kept  # bounded; the step before the epoch's end


def test_a_stall_by_the_rule_of_diagnose_goes_with_the_next_step_or_a_pause(tmp_path):
    history, told = RunHistory(), []
    history.subscribe(lambda changed: told.append(changed))
    steps = [_step(n, (1.0, 1.0), time=T0 + 0.5 * n) for n in range(1, 21)]  # a group every 0.5 s
    history.add(steps)
    last = T0 + 10
    assert not history.check_stall(last + 4, os.getpid(), lambda: "stopped") and history.findings.stall is None
    assert history.check_stall(last + 30, os.getpid(), lambda: "stopped") and told[-1] == Part.FINDINGS
    with_process = diagnosis.stall(steps, RunProcess(os.getpid(), socket.gethostname(), "train", True, T0),
                                   last + 30)
    stall = history.findings.stall
    assert stall is not None and stall.message.startswith("no step has finished for 30 s since step 20")
    assert f"continue it with kill -CONT {os.getpid()}" in stall.message
    assert with_process[0].message.split(";")[0] == stall.message.split(";")[0]  # the same rule, the same words
    assert not history.check_stall(last + 30, os.getpid(), lambda: "stopped")  # unchanged: no news
    assert history.add([_step(21, (1.0, 1.0), time=last + 31)]) & Part.FINDINGS and history.findings.stall is None
    assert history.check_stall(last + 60, os.getpid(), lambda: None)
    history.add([Paused(time=last + 61, step=21)])
    assert history.findings.stall is None and not history.check_stall(last + 600, os.getpid(), lambda: None)
    assert not history.check_stall(last + 600, None, lambda: None)  # no process holds the run: not stalled
