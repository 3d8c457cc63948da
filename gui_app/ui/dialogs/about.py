"""The Help → About text: versions of everything that matters for a bug report."""
from __future__ import annotations

import html
import platform
from typing import Any

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import qVersion

from gui_app.ui.config.device_panel import describe_gpu


def app_version() -> str:
    try:
        from gui_app import __version__

        return str(__version__)
    except ImportError:
        return "development"


def about_html(device_info: dict[str, Any] | None, detection_error: str | None = None) -> str:
    import pyqtgraph

    if device_info:
        tensorflow, keras = device_info.get("tensorflow", "?"), device_info.get("keras", "?")
    else:
        tensorflow = keras = html.escape(detection_error or "still detecting…")
    rows = [("Replica Studio", app_version()), ("TensorFlow", tensorflow), ("Keras", keras),
            ("Qt", qVersion()), ("PySide6", pyside_version), ("pyqtgraph", pyqtgraph.__version__),
            ("Python", platform.python_version()), ("System", f"{platform.system()} {platform.machine()}")]
    devices = []
    if device_info:
        for gpu in device_info.get("gpus") or []:
            devices.append(f"{gpu.get('name')}: {describe_gpu(gpu)}")
        cpu = device_info.get("cpu") or {}
        cores = cpu.get("cores")
        devices.append(f"CPU: {cpu.get('description') or 'processor'}" + (f", {cores} cores" if cores else ""))
        devices.append("NCCL available" if device_info.get("nccl_available") else "NCCL not available")
    table = "".join(f"<tr><td><b>{html.escape(k)}</b>&nbsp;&nbsp;</td><td>{html.escape(str(v))}</td></tr>"
                    for k, v in rows)
    device_list = "".join(f"<li>{html.escape(d)}</li>" for d in devices) or "<li>not detected yet</li>"
    return (f"<h3>Replica Studio</h3><p>Distributed TensorFlow training that shows every replica live.</p>"
            f"<table>{table}</table><p><b>Devices</b></p><ul>{device_list}</ul>")
