"""Help -> About from the typed ``devices --json`` answer (gui_app.core.answers.DevicesInfo)."""
from __future__ import annotations

from gui_app.core.answers import DevicesInfo, decode
from gui_app.ui.dialogs.about import about_html


def test_about_lists_the_detected_devices():
    gpu = {"name": "GPU:0", "description": "NVIDIA Fake 4090", "memory_bytes": 24 * 2**30, "compute_capability": [8, 9]}
    info = decode(DevicesInfo, {"tensorflow": "2.21.0", "keras": "3.15.1", "nccl_available": True, "gpus": [gpu],
                                "cpu": {"name": "CPU:0", "description": "Fake CPU", "cores": 2}})
    text = about_html(info)
    assert "<li>GPU:0: NVIDIA Fake 4090 · 24.0 GiB · compute 8.9</li>" in text
    assert "<li>CPU: Fake CPU, 2 cores</li>" in text and "<li>NCCL available</li>" in text
    assert "3.15.1" in text


def test_about_says_why_there_are_no_devices():
    text = about_html(None, "Device detection failed: no TensorFlow")
    assert "Device detection failed: no TensorFlow" in text and "<li>not detected yet</li>" in text
