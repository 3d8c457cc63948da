"""TensorFlow's C++ log lines are dropped from the CLI's stderr; everything else passes."""
from __future__ import annotations

import os
import threading

from gui_app.engine.run.quiet import forward


def test_tensorflow_lines_and_their_continuations_are_dropped():
    src_r, src_w = os.pipe()
    out_r, out_w = os.pipe()
    thread = threading.Thread(target=forward, args=(src_r, out_w))
    thread.start()
    os.write(src_w, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n")
    os.write(src_w, b"I0000 00:00:1796113123.903224   28025 cpu_feature_guard.cc:210] This TensorFlow binary\n"
                    b"To enable the following instructions: AVX2, rebuild TensorFlow.\n")
    os.write(src_w, b"W0000 00:00:17961.5   12 op_kernel.cc:1857] OP_REQUIRES failed\n")
    os.write(src_w, b"\t [[{{node decode_image/DecodeImage}}]]\n")
    os.write(src_w, b"Fatal Python error: Segmentation fault\n")
    os.close(src_w)
    thread.join(5)
    os.close(out_w)
    with os.fdopen(out_r, "rb") as f:
        assert f.read() == b"Fatal Python error: Segmentation fault\n"


def test_resume_overrides_are_limited_to_what_keeps_the_checkpoint():
    import pytest

    from gui_app.core.config import ConfigError, RunConfig
    from gui_app.core.overrides import apply_overrides

    config = apply_overrides(RunConfig(), ["training.learning_rate=0.0005", "training.schedule=cosine"])
    assert config.training.learning_rate == 0.0005 and config.training.schedule == "cosine"
    with pytest.raises(ConfigError, match="--set training.optimizer: cannot change on resume"):
        apply_overrides(RunConfig(), ["training.optimizer=sgd"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        apply_overrides(RunConfig(), ["training.learning_rate"])
    with pytest.raises(ConfigError, match="training.global_batch_size: must be an integer"):
        apply_overrides(RunConfig(), ["training.global_batch_size=big"])
