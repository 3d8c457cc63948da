"""Image dimensions from the file header, without decoding: a streamed folder must refuse a
decompression bomb (a small PNG that inflates to gigapixels) before TensorFlow allocates it.

Only the first few kilobytes are read (a JPEG's SOF marker may follow its EXIF block, so JPEGs
are walked marker by marker up to 1 MB). Formats: PNG, GIF, BMP, JPEG.
"""
from __future__ import annotations

import struct
from pathlib import Path

# Decoded pixels one image may have (about 120 MB as RGB): far above any training image, far
# below what takes a machine down. Same order as Pillow's decompression-bomb limit (89 M).
MAX_PIXELS = 40_000_000
_JPEG_LIMIT = 1 << 20


def image_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) from the start of an encoded image; None when the header is not understood."""
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24 and head[12:16] == b"IHDR":
        return struct.unpack(">II", head[16:24])
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return struct.unpack("<HH", head[6:10])
    if head.startswith(b"BM") and len(head) >= 26:
        w, h = struct.unpack("<ii", head[18:26])
        return abs(w), abs(h)
    if head.startswith(b"\xff\xd8"):
        return _jpeg_size(head)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = struct.unpack(">H", data[i + 2:i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[i + 5:i + 9])
            return w, h
        i += 2 + length
    return None


def check_file(path: Path, max_pixels: int = MAX_PIXELS) -> str | None:
    """None when ``path`` may be decoded, else why not ("40000x40000 pixels, above the limit")."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head.startswith(b"\xff\xd8"):
                head += f.read(_JPEG_LIMIT)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    size = image_size(head)
    if size is None:
        return "not a PNG, JPEG, BMP or GIF image"
    w, h = size
    if w <= 0 or h <= 0:
        return f"has an empty size ({w}x{h})"
    if w * h > max_pixels:
        return f"{w}x{h} pixels, above the limit of {max_pixels:,} (a decompression bomb?)"
    return None
