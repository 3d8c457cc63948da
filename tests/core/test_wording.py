"""One wording for people: settings named as the forms label them, strategies and counts told
alike in the window and on the command line, advice that fits the run."""
from __future__ import annotations

import struct
import zlib

from gui_app.core import wording
from gui_app.core.bottleneck import bottleneck
from gui_app.core.image_files import source_images


def test_messages_name_settings_as_the_forms_label_them():
    assert wording.label("training.global_batch_size") == "Global batch"
    assert wording.field("dataset.cache") == "Dataset → Stream cache"
    assert wording.ref("training.accumulation_steps") == "“Accumulate” (training.accumulation_steps)"
    # The window drops the command line's asides and shows the label for a leading key.
    assert wording.for_people("training.learning_rate: must be > 0; got -1.0") == "Learning rate: must be > 0; got -1.0"
    cli = ("out of memory with 32 examples per replica: OOM (try a smaller “Global batch” "
           "(training.global_batch_size), e.g. 32; the last checkpoint is kept; resume with --set "
           "training.global_batch_size=32)")
    assert wording.for_people(cli) == ("out of memory with 32 examples per replica: OOM (try a smaller "
                                       "“Global batch”, e.g. 32; the last checkpoint is kept)")
    assert wording.for_people("dataset.shuffle_buffer: must be >= 0") == "dataset.shuffle_buffer: must be >= 0"


def test_strategies_and_counts_in_one_style():
    assert wording.strategy_text("mirrored", devices=["/job:localhost/replica:0/task:0/device:CPU:0", "CPU:1"]) == \
        "mirrored, 2 replicas (CPU:0, CPU:1)"
    assert wording.strategy_text("multi_worker_mirrored", workers=2) == "multi-worker, 2 workers"
    assert wording.strategy_text("parameter_server", workers=2, ps=1) == "parameter servers, 2 workers + 1 ps"
    assert wording.strategy_text("one_device") == "one device (automatic)"
    assert wording.example_counts({"train_examples": 1294, "validation_examples": 144, "test_examples": 359}) == \
        "1,294 train + 144 validation / 359 test examples"
    assert wording.count(1, "class", "classes") == "1 class" and wording.count(1438, "example") == "1,438 examples"


def test_advice_fits_the_strategy_and_the_images():
    tiny = bottleneck(0.2, 0.6, 0.2, 2, "mirrored", [8, 8, 1])
    assert tiny.startswith("input is 60% of the step") and "smaller images" not in tiny
    assert "Dataset → Stream cache" in tiny and "dataset.cache" not in tiny
    assert "train on smaller images (Dataset → Image size)" in bottleneck(0.2, 0.6, 0.2, 2, "mirrored", [224, 224, 3])
    ps = bottleneck(0.3, 0.1, 0.6, 2, "parameter_server")
    assert ps.startswith("parameter-server updates and optimizer are 60% of the step") and "all-reduce" not in ps
    assert bottleneck(0.3, 0.1, 0.6, 2, "mirrored").startswith("all-reduce and optimizer are 60%")


def _png(width: int, height: int, colour_type: int) -> bytes:
    """A PNG's signature and IHDR chunk: all the header reader looks at."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr
            + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)))


def test_an_image_folder_is_read_as_it_is(tmp_path):
    for label in ("0", "1"):
        (tmp_path / label).mkdir()
        for i in range(3):
            (tmp_path / label / f"{i}.png").write_bytes(_png(8, 8, 0))
    (tmp_path / "0" / "notes.txt").write_text("not an image")
    assert source_images("image_folder", tmp_path) == {"size": [8, 8], "color_mode": "grayscale", "varied": False}
    (tmp_path / "1" / "wide.png").write_bytes(_png(64, 48, 2))  # one colour file of another size
    assert source_images("image_folder", tmp_path) == {"size": [8, 8], "color_mode": "rgb", "varied": True}
    assert source_images("npz", tmp_path) is None and source_images("image_folder", tmp_path / "none") is None
    (tmp_path / "manifest.json").write_text('{"image_shape": [28, 28, 1]}')
    assert source_images("tfrecord", tmp_path) == {"size": [28, 28], "color_mode": "grayscale", "varied": False}
