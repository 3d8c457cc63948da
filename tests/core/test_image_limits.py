"""Decompression bombs are skipped from their header, never decoded; CIFAR members are bounded."""
from __future__ import annotations

import struct
import zlib

import pytest

from gui_app.core.config import DatasetConfig
from gui_app.engine.datasets.image_header import dimensions, too_large


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(min(height, 16)))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_header_dimensions():
    assert dimensions(_png(300, 200)) == (300, 200)
    assert dimensions(b"GIF89a" + struct.pack("<HH", 7, 9) + b"\0" * 8) == (7, 9)
    assert dimensions(b"BM" + b"\0" * 16 + struct.pack("<ii", 5, -6) + b"\0" * 30) == (5, 6)
    jpeg = (b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 4) + b"\0\0"
            + b"\xff\xc0" + struct.pack(">HBHH", 11, 8, 480, 640) + b"\0" * 8)
    assert dimensions(jpeg) == (640, 480)
    assert dimensions(b"garbage") is None
    assert too_large(_png(60000, 60000), 100_000_000).startswith("60000x60000 pixels")
    assert too_large(_png(100, 100), 100_000_000) is None


def test_a_bomb_among_good_images_is_skipped_and_counted(tmp_path):
    from gui_app.engine.datasets.images import load_image_folder

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for i in range(4):
            (tmp_path / name / f"{i}.png").write_bytes(_png(8, 8))
    (tmp_path / "b" / "bomb.png").write_bytes(_png(50000, 50000))  # 2.5 gigapixels in a few kB
    dataset = load_image_folder(DatasetConfig(name="image_folder", path=str(tmp_path), image_size=(8, 8),
                                              max_image_pixels=10_000))
    assert len(dataset.y_train) + len(dataset.y_test) == 8
    assert any("skipped 1 images too large to decode safely" in w and "b/bomb.png" in w for w in dataset.warnings)


def test_cifar_member_over_the_limit_is_refused_unread(tmp_path, monkeypatch):
    import io
    import tarfile

    from gui_app.engine.datasets import cifar
    from gui_app.engine.datasets.base import DatasetError

    monkeypatch.setattr(cifar, "MAX_MEMBER_BYTES", 1000)
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
        info.size = 5000
        tar.addfile(info, io.BytesIO(b"\0" * 5000))
    with pytest.raises(DatasetError, match="5,000 bytes is too large for a CIFAR batch"):
        cifar.load_cifar(archive, cifar.CIFAR10)
