"""Render the application icon's PNGs, the Windows .ico and the macOS .icns from the SVGs.

    QT_QPA_PLATFORM=offscreen python packaging/render_icons.py

Run it after changing resources/icons/*.svg and commit the results: the wheel, the desktop
entry and the PyInstaller bundle use the rendered files, so no SVG renderer is needed at
install time. Qt's own SVG renderer draws them (the one the app uses for the window icon);
16 and 24 px come from hand-hinted SVGs so their edges fall on whole pixels.
"""
from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication, QImage, QPainter  # noqa: E402
from PySide6.QtSvg import QSvgRenderer  # noqa: E402

from gui_app.identity import APP_ID, ICON_SIZES  # noqa: E402

ICONS = ROOT / "resources" / "icons"
HINTED = {16: ICONS / f"{APP_ID}-16.svg", 24: ICONS / f"{APP_ID}-24.svg"}
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# icns element types holding PNG data, by pixel size (Apple's "Icon Composer" types).
ICNS_TYPES = {16: b"icp4", 32: b"icp5", 64: b"icp6", 128: b"ic07", 256: b"ic08", 512: b"ic09"}


def render(size: int) -> bytes:
    renderer = QSvgRenderer(str(HINTED.get(size, ICONS / f"{APP_ID}.svg")))
    if not renderer.isValid():
        raise SystemExit(f"render_icons: cannot read the SVG for {size} px")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(data)


def ico(pngs: dict[int, bytes]) -> bytes:
    """A Windows .ico whose entries are PNGs (supported since Windows Vista)."""
    header = struct.pack("<HHH", 0, 1, len(ICO_SIZES))
    offset = 6 + 16 * len(ICO_SIZES)
    entries, blobs = b"", b""
    for size in ICO_SIZES:
        png = pngs[size]
        # Width and height are one byte each; 0 means 256.
        entries += struct.pack("<BBBBHHII", size % 256, size % 256, 0, 0, 1, 32, len(png), offset)
        blobs += png
        offset += len(png)
    return header + entries + blobs


def icns(pngs: dict[int, bytes]) -> bytes:
    body = b"".join(kind + struct.pack(">I", 8 + len(pngs[size])) + pngs[size] for size, kind in ICNS_TYPES.items())
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> None:
    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841 - QImage text/SVG need it
    pngs = {size: render(size) for size in sorted(set(ICON_SIZES) | set(ICO_SIZES) | set(ICNS_TYPES))}
    for size in ICON_SIZES:
        path = ICONS / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pngs[size])
    (ICONS / f"{APP_ID}.ico").write_bytes(ico(pngs))
    (ICONS / f"{APP_ID}.icns").write_bytes(icns(pngs))
    print(f"wrote {len(ICON_SIZES)} PNGs, {APP_ID}.ico and {APP_ID}.icns under {ICONS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
