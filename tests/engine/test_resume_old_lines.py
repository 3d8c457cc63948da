"""A run whose events an older version wrote (protocol 2's long step lines, no lean form),
resumed by this one: the file then holds both forms and reads as one history."""
from __future__ import annotations

import json

from engine_helpers import config_dict, run_in_process

from gui_app.core import events as ev
from gui_app.core import rundir
from gui_app.core.event_lines import LineDecoder, LineEncoder
from gui_app.engine.run.control import Control


def _as_protocol_2(path) -> None:
    """Rewrite an events file as protocol 2 wrote it: every replica entry whole, ``protocol: 2``."""
    decoder, encoder, out = LineDecoder(), LineEncoder("full"), []
    for line in path.read_bytes().splitlines():
        event = decoder.line(line)
        if isinstance(event, ev.RunStarted):
            event.protocol = 2
        out.append(json.dumps(encoder.encode(event), separators=(",", ":")).encode() + b"\n")
    path.write_bytes(b"".join(out))


def test_a_run_resumed_over_an_old_form_file_still_reads(tmp_path, write_config):
    config = write_config(config_dict(training={"epochs": 2, "global_batch_size": 64, "seed": 3,
                                                "steps_per_call": 4}))
    control = Control()

    def stop_when(event):
        if event["type"] == "step" and event["step"] >= 9:
            control.command("stop")

    code, first = run_in_process("train", config, tmp_path, on_event=stop_when, control=control)
    assert code == 0
    run_dir = rundir.list_runs(tmp_path)[0].path
    events_file = run_dir / rundir.EVENTS_FILE
    _as_protocol_2(events_file)
    old_lines = events_file.read_bytes().splitlines()
    assert all(b'"device":"/job:localhost' in line for line in old_lines if line.startswith(b'{"type":"step"'))
    stopped_at = first.events[-1]["step"]

    code, second = run_in_process("resume", run_dir)
    assert code == 0 and second.events[-1]["status"] == "completed"
    lines = events_file.read_bytes().splitlines()
    assert lines[:len(old_lines)] == old_lines  # the old lines stay as they were written
    new_steps = [line for line in lines[len(old_lines):] if line.startswith(b'{"type":"step"')]
    assert new_steps and all(b"device" not in line for line in new_steps)

    events = rundir.read_events(run_dir)
    steps = [e for e in events if isinstance(e, ev.Step)]
    total = second.events[-1]["step"]
    assert [s.step for s in steps] == list(range(1, total + 1)) and stopped_at < total
    devices = [r.device for r in events[0].replicas]
    assert len(devices) == 2 and all(devices)
    assert all([r.device for r in s.replicas] == devices for s in steps)  # both forms: the same entries
    history = rundir.read_history(run_dir)
    assert history.replicas.devices == devices and len(history.replicas.steps) == total
    assert rundir.read_run(run_dir).status == "completed"
