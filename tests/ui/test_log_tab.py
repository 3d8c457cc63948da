"""The Log tab tells problems from noise: TensorFlow's INFO lines, the converters' notes and a
cluster that formed are greyed and not counted; a real error and a warning are; long lines wrap."""
from __future__ import annotations

from PySide6.QtWidgets import QPlainTextEdit

import pytest

from gui_app.ui.tabs.log import LogTab
from gui_app.ui.tabs.log_lines import ERROR, ROUTINE, WARNING, kind

# Lines as a clean export and a two-worker cluster run printed them, which counted as "3 warning or error lines".
ROUTINE_SEEN = (
    "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
    "W0000 00:00:1764600000.123456   4242 tf_tfl_flatbuffer_helpers.cc:365] Ignored output_format.",
    "W0000 00:00:1764600000.123999   4242 tf_tfl_flatbuffer_helpers.cc:368] Ignored drop_control_dependency.",
    "WARNING:tf2onnx.tf_loader:'--tag' not specified for saved_model. Using --tag serve",
    "warning: cluster of 2 workers joined in 11.6 s",
    "I0000 00:00:1764600000.5   4242 cpu_feature_guard.cc:210] This TensorFlow binary is optimized to use AVX2",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
)
PROBLEMS = (
    ("Traceback (most recent call last):", ERROR),
    ("RuntimeError: fake engine crashed on purpose", ERROR),
    ("E0000 00:00:1764600000.1   4242 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error", ERROR),
    ("warning: dataset.cache is off; the input pipeline may be the bottleneck", WARNING),
    ("W0000 00:00:1764600000.2   4242 loop_optimizer.cc:933] Skipping loop optimization for Merge node", WARNING),
)


# The chief's news that the cluster formed, as a local cluster's launcher relays it and as a host or a
# Slurm job logs it: information, neither coloured nor counted (a user saw it as a warning).
JOINED = ("[worker 0] [replica-studio] worker 0: cluster of 2 workers joined in 5.3 s",
          "[replica-studio] worker 0: cluster of 16 workers joined in 112.0 s")


@pytest.mark.parametrize("line", ROUTINE_SEEN)
def test_routine_output_is_not_a_problem(line):
    assert kind(line) == ROUTINE


@pytest.mark.parametrize(("line", "expected"), PROBLEMS)
def test_errors_and_warnings_are_problems(line, expected):
    assert kind(line) == expected


def test_the_tab_counts_errors_and_warnings_only_and_wraps_long_lines(qtbot):
    tab = LogTab()
    qtbot.addWidget(tab)
    counts: list[int] = []
    tab.warnings_seen.connect(counts.append)
    for line in (*ROUTINE_SEEN, *(line for line, _ in PROBLEMS[:2]), PROBLEMS[3][0]):
        tab.append_line(line)
    assert counts == [1, 2, 3]  # the routine lines came first: none counted
    assert tab.summary.text() == "2 error lines, 1 warning line"
    assert tab.view.lineWrapMode() == QPlainTextEdit.LineWrapMode.WidgetWidth
    tab.clear()
    assert tab.summary.text() == "" and tab.view.toPlainText() == ""


@pytest.mark.parametrize("line", JOINED)
def test_the_cluster_join_line_is_information_not_a_warning(line):
    assert kind(line) not in (ERROR, WARNING)


def test_the_join_lines_leave_the_count_empty(qtbot):
    tab = LogTab()
    qtbot.addWidget(tab)
    counts: list[int] = []
    tab.warnings_seen.connect(counts.append)
    for line in (*JOINED, "warning: cluster of 2 workers joined in 5.3 s"):  # and an older run's warning event
        tab.append_line(line)
    assert counts == [] and tab.summary.text() == ""
    tab.append_line("warning: dataset.cache is off")  # a real warning still counts
    assert counts == [1] and tab.summary.text() == "1 warning line"
