"""Image dimensions from the file header, before anything is decoded (TensorFlow-free): the
one check both the in-memory image folder and the streamed sources make.

A decompression bomb is a small file that decodes to gigapixels (a 40 kB PNG of 30000x30000 is
2.7 GB as RGB); decoding it on eight threads fills memory. The header says how large the image
is, so files above the pixel limit (``dataset.max_image_pixels``) are skipped and counted
instead of decoded. A header we cannot read is left to the decoder (it rejects broken files).
"""
from __future__ import annotations

import struct
from pathlib import Path

MAX_IMAGE_BYTES = 256 << 20  # no training image is a quarter of a gigabyte
_JPEG_HEAD = 1 << 20  # a JPEG's frame size may follow its EXIF block: read this much of it


def dimensions(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, JPEG, GIF or BMP header; None when it cannot tell."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
            return struct.unpack(">II", data[16:24])
        if data[:6] in (b"GIF87a", b"GIF89a"):
            return struct.unpack("<HH", data[6:10])
        if data[:2] == b"BM":
            width, height = struct.unpack("<ii", data[18:26])
            return abs(width), abs(height)
        if data[:2] == b"\xff\xd8":
            return _jpeg(data)
    except struct.error:
        return None
    return None


def _jpeg(data: bytes) -> tuple[int, int] | None:
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
        # SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC) carry the frame size.
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return width, height
        i += 2 + length
    return None


def too_large(data: bytes, max_pixels: int) -> str | None:
    """Why ``data`` must not be decoded (a one-line reason), or None."""
    if len(data) > MAX_IMAGE_BYTES:
        return f"{len(data):,} bytes (limit {MAX_IMAGE_BYTES:,})"
    size = dimensions(data)
    if size and size[0] * size[1] > max_pixels:
        return f"{size[0]}x{size[1]} pixels (limit dataset.max_image_pixels = {max_pixels:,})"
    return None


def check_file(path: str | Path, max_pixels: int) -> str | None:
    """:func:`too_large` for a file, reading only its header (a streamed folder lists millions);
    also refuses what is not an image at all."""
    try:
        size = Path(path).stat().st_size
        with open(path, "rb") as f:
            head = f.read(64)
            if head.startswith(b"\xff\xd8"):
                head += f.read(_JPEG_HEAD)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if size > MAX_IMAGE_BYTES:
        return f"{size:,} bytes (limit {MAX_IMAGE_BYTES:,})"
    found = dimensions(head)
    if found is None:
        return "not a PNG, JPEG, BMP or GIF image"
    if found[0] <= 0 or found[1] <= 0:
        return f"has an empty size ({found[0]}x{found[1]})"
    return too_large(head, max_pixels)
