"""Images as PNG ``data:`` URIs, so the report's misclassified images travel inside the file.
A PNG writer of a few lines (zlib and struct, both in the standard library): the core takes no
imaging library for thumbnails of 28x28 digits."""
from __future__ import annotations

import base64
import struct
import zlib

import numpy as np


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bytes(image: np.ndarray) -> bytes:
    """An [H, W] or [H, W, C] uint8 image (C = 1, 3 or 4) as PNG bytes."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    if image.ndim == 3 and image.shape[-1] == 1:
        image = image[..., 0]
    height, width = image.shape[:2]
    channels = 1 if image.ndim == 2 else image.shape[-1]
    color_type = {1: 0, 3: 2, 4: 6}[channels]  # grey, RGB, RGBA
    rows = image.reshape(height, -1)
    raw = b"".join(b"\x00" + row.tobytes() for row in rows)  # filter 0 (none) before each row
    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 9))
            + _chunk(b"IEND", b""))


def data_uri(image: np.ndarray) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes(image)).decode("ascii")
