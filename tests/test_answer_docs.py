"""docs/answers.md documents every key of every command answer (gui_app.core.answers) and of
every entry of their parts, so a new key cannot go undocumented."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from gui_app.core import answers
from gui_app.core.event_codec import fields
from gui_app.core.export_result import ExportResult, ParityReport

DOC = (Path(__file__).resolve().parents[1] / "docs" / "answers.md").read_text(encoding="utf-8")
CODE = re.compile(r"`([^`]+)`")
# Where each part class (a field holding a dataclass) is documented.
PART_SECTIONS = {answers.SweepTrial: "`SweepStatus.trials` entries", answers.ScalingRow: "`ScalingReport.rows` entries",
                 answers.OptionRow: "`ScalingReport.options` entries", answers.TimeSplit: "`time_split`",
                 answers.GpuInfo: "`DevicesInfo.gpus` entries", answers.CpuInfo: "`DevicesInfo.cpu`",
                 answers.LogicalDevice: "`DevicesInfo.logical_devices` entries",
                 answers.Finding: "`Diagnosis.findings` entries",
                 answers.Difference: "`Certificate.first_difference`"}


def _section(heading: str) -> str:
    """The text under a heading of docs/answers.md, up to the next heading."""
    found = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#|\Z)", DOC, flags=re.M | re.S)
    assert found, f"docs/answers.md has no section {heading}"
    return found.group(1)


def _documented(heading: str) -> set[str]:
    """The keys in the first column of the section's table."""
    rows = [line.strip().strip("|").split("|") for line in _section(heading).splitlines() if line.startswith("|")]
    return {name for row in rows for name in CODE.findall(row[0])}


def _parts(cls: type) -> set[type]:
    found = set()
    for f in fields(cls):
        if f.part is not None:
            found |= {f.part} | _parts(f.part)
    return found


@pytest.mark.parametrize("cls", answers.ANSWERS, ids=lambda cls: cls.__name__)
def test_every_key_of_an_answer_is_in_its_table(cls):
    assert {f.wire for f in fields(cls)} - _documented(cls.__name__) == set()


@pytest.mark.parametrize("part", PART_SECTIONS, ids=lambda cls: cls.__name__)
def test_every_key_of_a_part_is_in_its_table(part):
    assert {f.wire for f in fields(part)} - _documented(PART_SECTIONS[part]) == set()


def test_every_part_has_its_section():
    assert set().union(*map(_parts, answers.ANSWERS)) == set(PART_SECTIONS)


def test_every_answer_is_in_the_commands_table():
    named = {name for row in _section("Command answers").splitlines() if row.startswith("|")
             for name in CODE.findall(row.strip().strip("|").split("|")[-1])}
    assert {cls.__name__ for cls in answers.ANSWERS} <= named


def test_the_export_result_is_documented_too():
    parity = ParityReport("onnx", "onnxruntime", 256, 1e-6, 1e-7, 1.0, 0.97, 0.97, "max abs diff < 1e-4", True)
    result = ExportResult("onnx", Path("a.onnx"), Path("a.card.json"), 10, parity, True, 1.0).to_dict()
    assert set(result) - _documented("ExportResult") == set()
    assert set(result["parity"]) - _documented("`ExportResult.parity`") == set()
