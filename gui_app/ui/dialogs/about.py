"""The Help → About text: versions of everything that matters for a bug report."""
from __future__ import annotations

import html
import platform

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import qVersion

from gui_app.core.answers import DevicesInfo


def app_version() -> str:
    try:
        from gui_app import __version__

        return str(__version__)
    except ImportError:
        return "development"


def about_html(device_info: DevicesInfo | None, detection_error: str | None = None) -> str:
    import pyqtgraph

    if device_info:
        tensorflow, keras = device_info.tensorflow, device_info.keras
    else:
        tensorflow = keras = html.escape(detection_error or "still detecting…")
    rows = [("Replica Studio", app_version()), ("TensorFlow", tensorflow), ("Keras", keras),
            ("Qt", qVersion()), ("PySide6", pyside_version), ("pyqtgraph", pyqtgraph.__version__),
            ("Python", platform.python_version()), ("System", f"{platform.system()} {platform.machine()}")]
    devices = []
    if device_info:
        devices += [f"{gpu.name}: {gpu.describe()}" for gpu in device_info.gpus]
        devices.append(f"CPU: {device_info.cpu.describe()}")
        devices.append("NCCL available" if device_info.nccl_available else "NCCL not available")
    table = "".join(f"<tr><td><b>{html.escape(k)}</b>&nbsp;&nbsp;</td><td>{html.escape(str(v))}</td></tr>"
                    for k, v in rows)
    device_list = "".join(f"<li>{html.escape(d)}</li>" for d in devices) or "<li>not detected yet</li>"
    return (f"<h3>Replica Studio</h3><p>Distributed TensorFlow training that shows every replica live.</p>"
            f"<table>{table}</table><p><b>Devices</b></p><ul>{device_list}</ul>")
