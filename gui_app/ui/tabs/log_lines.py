"""What a line of the Log tab is: a problem (an error or a warning), routine output, or neither.

The engine's stderr carries TensorFlow's, LiteRT's and tf2onnx's chatter beside the lines that
matter. Counted by words alone ("warning", "error"), a clean export and a cluster run showed
"3 warning or error lines" (LiteRT's XNNPACK INFO line, the converter's "Ignored output_format",
tf2onnx's note that it used the SavedModel's "serve" tag, the engine's "cluster of 2 workers
joined in 11.6 s"). Routine lines are matched first, each with the reason it is routine; then
errors, then warnings. Qt-free, so the table is tested line by line.
"""
from __future__ import annotations

import re

ERROR, WARNING, ROUTINE = "error", "warning", "routine"

# (pattern, why the line is not a problem)
ROUTINE_LINES = (
    (r"^INFO: ", "LiteRT's and TensorFlow Lite's own INFO lines (the XNNPACK delegate was created)"),
    (r"^I\d{4} \d\d:\d\d:[\d.]+ ", "TensorFlow's C++ INFO lines (absl format)"),
    (r"^(I|INFO):[\w.]+:", "Python INFO logging (absl, tensorflow, tf2onnx)"),
    (r"^WARNING: All log messages before absl::InitializeLog\(\)", "absl's banner before its first line"),
    (r"\] Ignored (output_format|drop_control_dependency)\.$", "the TFLite converter's notes on options it ignores"),
    (r"^\s*fully_quantize: \d", "the TFLite converter's quantisation settings"),
    (r"'--tag' not specified for saved_model", "tf2onnx reading our SavedModel with its one tag, serve"),
    (r"\bis deprecated and will be removed\b|^Instructions for updating:", "a library's deprecation notice"),
    # The engine now logs the join as a line of its own ("[replica-studio] worker 0: cluster of 2 workers
    # joined in 5.3 s", no problem word in it); a run recorded before replays it as a warning event.
    (r"^warning: cluster of \d+ workers? joined in [\d.]+ s$", "the cluster formed: how long it took"),
)
_ROUTINE = re.compile("|".join(f"(?:{pattern})" for pattern, _ in ROUTINE_LINES))
# A Python exception's last line ("RuntimeError: ...", "tensorflow.errors.InternalError: ...") names
# no error as a word of its own.
_ERROR = re.compile(r"^[EF]\d{4} |^[\w.]*(Error|Exception)\b|\b(error|exception|traceback|fatal|failed)\b",
                    re.IGNORECASE)
_WARNING = re.compile(r"^W\d{4} |\bwarn(ing)?\b", re.IGNORECASE)


def kind(line: str) -> str | None:
    """``error``, ``warning``, ``routine`` (output known to be harmless), or None."""
    if _ROUTINE.search(line):
        return ROUTINE
    if _ERROR.search(line):
        return ERROR
    if _WARNING.search(line):
        return WARNING
    return None
