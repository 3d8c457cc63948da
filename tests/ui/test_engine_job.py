"""EngineJob and ServingJob: one lifecycle for every engine job beside training (signals, states,
cancel with a grace period, timeouts, a newer job replacing an older one), on small scripts."""
from __future__ import annotations

import os
import sys
import textwrap

from PySide6.QtCore import QMetaMethod

import pytest

from gui_app.core.events import Progress
from gui_app.ui.workers.engine_job import CANCELLING, DONE, IDLE, RUNNING, STOPPING, EngineJob, ServingJob

TIMEOUT_MS = 30_000

# A process that says its pid (as a progress line), then sleeps: something to cancel.
SLEEPER = """
import json, os, signal, sys, time
if "--ignore-sigterm" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(json.dumps({"type": "progress", "stage": "pid", "done": os.getpid()}), flush=True)
time.sleep(60)
"""


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code), *args]


def _record(job: EngineJob) -> list[tuple]:
    """Every signal of ``job``, in order."""
    seen: list[tuple] = []
    for name in ("progress", "result", "failed", "finished"):
        getattr(job, name).connect(lambda *args, name=name: seen.append((name, *args)))
    return seen


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _started_sleeper(qtbot, job: EngineJob) -> int:
    with qtbot.waitSignal(job.progress, timeout=TIMEOUT_MS) as said:
        job.start()
    return int(said.args[0].done)


def test_a_json_answer_is_the_result_then_finished(qtbot):
    job = EngineJob(_python("print('{\"gpus\": []}')"), name="device detection")
    seen = _record(job)
    assert job.state == IDLE
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        assert job.start() is job and job.state == RUNNING and job.is_running()
    assert seen == [("result", {"gpus": []}), ("finished",)]
    assert job.state == DONE and not job.is_running() and not job.cancelled
    with pytest.raises(RuntimeError, match="runs once"):
        job.start()


def test_the_error_line_without_its_prefix_is_the_failure_and_reaches_the_log(qtbot):
    job = EngineJob(_python("import sys; print('W tf: noise', file=sys.stderr); "
                            "sys.exit('replica-studio devices: no TensorFlow')"))
    seen, logs = _record(job), []
    job.log_line.connect(logs.append)
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        job.start()
    assert seen == [("failed", "no TensorFlow"), ("finished",)]
    assert logs == ["W tf: noise", "replica-studio devices: no TensorFlow"]


TOOL = """
import json, sys, time
def say(**line):
    print(json.dumps(line), flush=True)
say(type="progress", stage="write", fraction=0.5, message="half", time=time.time())
say(type="progress", stage="write", fraction=0.5, message="half", time=time.time() + 1)  # nothing new
say(type="progress", stage="write", fraction=1.0, message="all", time=time.time())
say(type="other", value=1)  # not the answer
say(type="answer", value=3)
print("replica-studio tool: the check failed", file=sys.stderr)
sys.exit(1)
"""


def test_progress_only_when_it_changed_and_the_typed_answer_read_when_its_exit_is_accepted(qtbot):
    job = EngineJob(_python(TOOL), name="the tool", answer="answer", read=lambda line: line["value"] * 2,
                    ok_codes=(0, 1))
    seen = _record(job)
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        job.start()
    progress = [args[1] for args in seen if args[0] == "progress"]
    assert [(p.fraction, p.message) for p in progress] == [(0.5, "half"), (1.0, "all")]
    assert all(isinstance(p, Progress) and p.stage == "write" for p in progress)
    assert seen[2:] == [("result", 6), ("finished",)]


@pytest.mark.parametrize(("options", "failure"), [
    ({}, "the check failed"),  # exit 1 is not accepted: its error line says why
    ({"ok_codes": (0, 1), "read": lambda line: line["missing"]},
     "the tool printed a result the window cannot read ('missing')"),
])
def test_an_answer_that_cannot_be_used_is_one_failure(qtbot, options, failure):
    job = EngineJob(_python(TOOL), name="the tool", answer="answer", **options)
    seen = _record(job)
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        job.start()
    assert [args for args in seen if args[0] != "progress"] == [("failed", failure), ("finished",)]


@pytest.mark.parametrize(("code", "failure"), [
    ("pass", "the tool printed no result"),
    ("import sys; sys.exit(3)", "the tool exited with code 3"),
    ("import sys; sys.exit(130)", "the tool was interrupted"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "the tool crashed"),
])
def test_an_end_without_an_answer_or_an_error_line_says_how_it_ended(qtbot, code, failure):
    job = EngineJob(_python(code), name="the tool")
    with qtbot.waitSignal(job.failed, timeout=TIMEOUT_MS) as failed:
        job.start()
    assert failed.args == [failure]


def test_a_missing_program_is_a_failure_then_finished(qtbot, tmp_path):
    job = EngineJob([str(tmp_path / "no-such-engine")], name="the tool")
    seen = _record(job)
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        job.start()
    assert [name for name, *_ in seen] == ["failed", "finished"] and "no-such-engine" in seen[0][1]


def test_a_timeout_is_a_failure_and_kills_the_process(qtbot):
    job = EngineJob(_python(SLEEPER), name="the inspection", timeout_s=2)  # room for Python to start
    seen = _record(job)
    pid = _started_sleeper(qtbot, job)
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        pass
    assert seen[1:] == [("failed", "the inspection did not answer within 2 s"), ("finished",)]
    assert job.killed and _gone(pid)


@pytest.mark.parametrize("ignores_sigterm", [False, True])
def test_cancel_ends_the_process_then_finished_comes_and_nothing_else(qtbot, ignores_sigterm):
    args = ["--ignore-sigterm"] if ignores_sigterm else []
    job = EngineJob(_python(SLEEPER, *args), name="the export")
    seen = _record(job)
    pid = _started_sleeper(qtbot, job)
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        job.cancel(grace_s=0.3)
        assert job.state == CANCELLING and job.cancelled and job.is_running()
    assert [name for name, *_ in seen] == ["progress", "finished"]  # no result, no failure
    assert job.state == DONE and job.killed is ignores_sigterm and _gone(pid)


def test_cancel_and_wait_returns_with_the_process_gone(qtbot):
    job = EngineJob(_python(SLEEPER, "--ignore-sigterm"))
    seen = _record(job)
    pid = _started_sleeper(qtbot, job)
    job.cancel(grace_s=0.3, wait=True)
    assert seen[-1] == ("finished",) and job.state == DONE and job.killed and _gone(pid)


def test_a_newer_job_disconnects_ends_and_deletes_the_one_it_replaces(qtbot):
    old = EngineJob(_python(SLEEPER))
    stale = _record(old)
    pid = _started_sleeper(qtbot, old)
    new = EngineJob(_python("print('{\"fresh\": true}')"))
    answers = _record(new)
    with qtbot.waitSignals([new.finished, old.destroyed], timeout=TIMEOUT_MS):
        new.start(replacing=old)
        for signal in (old.progress, old.result, old.failed, old.log_line):
            assert not old.isSignalConnected(QMetaMethod.fromSignal(signal))
    assert stale == [("progress", stale[0][1])]  # nothing after it was replaced
    assert answers == [("result", {"fresh": True}), ("finished",)] and _gone(pid)


SERVER = """
import json, sys
print(json.dumps({"type": "ready", "model": "m"}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if request.get("quit"):
        sys.exit("replica-studio predict: the model process gave up")
    if request.get("exit"):
        sys.exit(0)
    print(json.dumps({"type": "predictions", "id": request["id"]}), flush=True)
"""


@pytest.fixture
def server(qtbot):
    job = ServingJob(_python(SERVER), name="the model process")
    seen = _record(job)
    with qtbot.waitSignal(job.result, timeout=TIMEOUT_MS) as ready:
        job.start()
    assert ready.args == [{"type": "ready", "model": "m"}]
    yield job, seen
    job.cancel(wait=True)


def test_a_server_answers_each_request_as_a_result_and_ends_when_cancelled(qtbot, server):
    job, seen = server
    for request_id in (1, 2):
        with qtbot.waitSignal(job.result, timeout=TIMEOUT_MS) as answer:
            assert job.ask({"id": request_id, "images": []})
        assert answer.args == [{"type": "predictions", "id": request_id}]
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        job.cancel()
    assert [name for name, *_ in seen] == ["result"] * 3 + ["finished"] and not job.ask({"id": 3})


@pytest.mark.parametrize(("request_", "failure"), [
    ({"quit": True}, "the model process gave up"),
    ({"exit": True}, "the model process ended (exit code 0)"),  # an end nobody asked for
])
def test_a_server_that_ends_by_itself_has_failed(qtbot, server, request_, failure):
    job, seen = server
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        job.ask(request_)
    assert seen[-2:] == [("failed", failure), ("finished",)]


# Reads words on stdin; "stop" says goodbye and ends, unless told to ignore it (then it hangs).
STOPPABLE = """
import json, sys, time
print(json.dumps({"type": "ready"}), flush=True)
for line in sys.stdin:
    if line.strip() == "stop" and "--stubborn" not in sys.argv:
        print(json.dumps({"type": "bye"}), flush=True)
        sys.exit(0)
    print(json.dumps({"type": "heard", "word": line.strip()}), flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("stubborn", [False, True])
def test_stop_is_a_word_then_the_end_of_input_then_a_kill_after_the_grace_period(qtbot, stubborn):
    job = ServingJob(_python(STOPPABLE, *(["--stubborn"] if stubborn else [])), name="the engine")
    seen = _record(job)
    with qtbot.waitSignal(job.result, timeout=TIMEOUT_MS):
        job.start()
    with qtbot.waitSignal(job.result, timeout=TIMEOUT_MS) as heard:
        assert job.send("pause")
    assert heard.args == [{"type": "heard", "word": "pause"}]
    with qtbot.waitSignal(job.finished, timeout=TIMEOUT_MS):
        assert job.stop(0.5, word="stop") and job.state == STOPPING and job.is_running()
        assert not job.send("pause") and not job.stop(0.5)  # stopping: no more words
    ends = seen[2:]
    if stubborn:  # it went on reading, answered "stop" as any word, then input ended; killed
        assert ends == [("result", {"type": "heard", "word": "stop"}),
                        ("failed", "the engine did not stop within 0.5 s and was killed"), ("finished",)]
        assert job.killed
    else:  # an end that was asked for: its last answer, then finished alone
        assert ends == [("result", {"type": "bye"}), ("finished",)] and not job.killed
