"""Image dimensions from the file header, before anything is decoded (TensorFlow-free): the
one check both the in-memory image folder and the streamed sources make.

A decompression bomb is a small file that decodes to gigapixels (a 40 kB PNG of 30000x30000 is
2.7 GB as RGB); decoding it on eight threads fills memory. The header says how large the image
is (gui_app.core.image_files reads it), so files above the pixel limit
(``dataset.max_image_pixels``) are skipped and counted instead of decoded. A header we cannot
read is left to the decoder (it rejects broken files).
"""
from __future__ import annotations

from pathlib import Path

from gui_app.core.image_files import dimensions

MAX_IMAGE_BYTES = 256 << 20  # no training image is a quarter of a gigabyte
_JPEG_HEAD = 1 << 20  # a JPEG's frame size may follow its EXIF block: read this much of it


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
