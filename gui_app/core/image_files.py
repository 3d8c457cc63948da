"""Image files as they are, from their headers alone (TensorFlow-free, Qt-free): size and colour
of a PNG, JPEG, GIF or BMP, and what a folder of class sub-folders holds.

``replica-studio inspect`` reports the source images of a set so the forms can propose their
size and colour (8x8 grey digits trained at the default 32x32 RGB have 24 times the parameters
for nothing); the dataset form reads the same few headers when a folder is chosen, before the
first inspection, so that one inspection at the right size follows. The decoders' safety check
(gui_app.engine.datasets.image_header) reads the size from here too.
"""
from __future__ import annotations

import json
import os
import struct
from collections import Counter
from pathlib import Path
from typing import Any

from gui_app.core.file_kinds import IMAGE_SUFFIXES

FILES_PER_CLASS = 4  # a few headers per class tell the size and colour of a folder of thousands
MAX_FILES = 64  # bounded: the form reads them on the GUI thread (64 headers: ~2 ms on a local disk)
HEADER_BYTES = 64 << 10  # a JPEG's frame header may follow an EXIF block


def dimensions(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, JPEG, GIF or BMP header; None when it cannot tell."""
    found = header(data)
    return found[:2] if found else None


def header(data: bytes) -> tuple[int, int, int | None] | None:
    """(width, height, channels) from an image header; channels is 1 for grey, 3 for colour,
    None when the header does not say (a palette). None when it is no image we know."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            colour_type = data[25]
            return width, height, 1 if colour_type in (0, 4) else 3 if colour_type in (2, 6) else None
        if data[:6] in (b"GIF87a", b"GIF89a"):
            width, height = struct.unpack("<HH", data[6:10])
            return width, height, None
        if data[:2] == b"BM":
            width, height = struct.unpack("<ii", data[18:26])
            (bits,) = struct.unpack("<H", data[28:30])
            return abs(width), abs(height), 3 if bits >= 16 else None
        if data[:2] == b"\xff\xd8":
            return _jpeg(data)
    except (struct.error, IndexError):
        return None
    return None


def _jpeg(data: bytes) -> tuple[int, int, int | None] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2:i + 4])
        # SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC) carry the frame size and components.
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return width, height, 1 if data[i + 9] == 1 else 3
        i += 2 + length
    return None


def read_header(path: str | Path) -> tuple[int, int, int | None] | None:
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head.startswith(b"\xff\xd8"):
                head += f.read(HEADER_BYTES)
    except OSError:
        return None
    return header(head)


def _some_images(root: Path) -> list[Path]:
    """A few image files of each class folder of ``root`` (the first ones listed, not sorted:
    a folder of 60,000 is not read whole)."""
    picked: list[Path] = []
    try:
        classes = sorted(e.path for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
    except OSError:
        return []
    for folder in classes:
        try:
            with os.scandir(folder) as entries:
                found = 0
                for entry in entries:
                    if entry.name.lower().endswith(IMAGE_SUFFIXES) and entry.is_file():
                        picked.append(Path(entry.path))
                        found += 1
                        if found == FILES_PER_CLASS:
                            break
        except OSError:
            continue
        if len(picked) >= MAX_FILES:
            break
    return picked[:MAX_FILES]


def source_images(kind: str, path: str | Path | None) -> dict[str, Any] | None:
    """What the images of a set are before any resizing, where that is cheap to know: an image
    folder's headers, a prepared TFRecord folder's manifest. ``{"size": [h, w], "color_mode":
    "grayscale"|"rgb", "varied": bool}`` (``size`` the most common, ``varied``: not all alike;
    ``color_mode`` grey only when every file read is grey), or None."""
    if not path:
        return None
    root = Path(path).expanduser()
    if kind == "tfrecord":
        return _from_manifest(root)
    if kind != "image_folder" or not root.is_dir():
        return None
    headers = [h for h in map(read_header, _some_images(root)) if h is not None]
    if not headers:
        return None
    sizes = Counter((height, width) for width, height, _ in headers)
    (height, width), _ = sizes.most_common(1)[0]
    grey = all(channels == 1 for _, _, channels in headers)
    return {"size": [height, width], "color_mode": "grayscale" if grey else "rgb", "varied": len(sizes) > 1}


def _from_manifest(root: Path) -> dict[str, Any] | None:
    """``replica-studio prepare`` writes the images' shape into its manifest."""
    try:
        shape = json.loads((root / "manifest.json").read_text(encoding="utf-8")).get("image_shape")
    except (OSError, ValueError, AttributeError):
        return None
    if not (isinstance(shape, list) and len(shape) == 3 and all(isinstance(v, int) for v in shape)):
        return None
    return {"size": shape[:2], "color_mode": "grayscale" if shape[2] == 1 else "rgb", "varied": False}
