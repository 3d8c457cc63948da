"""What a file handed to the app is: a .keras file that is not one gets named for what it is
(Keras 3 calls any non-zip .keras file "File not found", although it exists)."""
from __future__ import annotations

import zipfile

import pytest

from gui_app.core.file_kinds import HDF5_SIGNATURE, keras_file_problem


@pytest.mark.parametrize("content, what", [
    (b"these are my notes\n", "text"),
    ("caf\u00e9 notes".encode() * 2000, "text"),  # a UTF-8 character cut by the sample is still text
    (b"", "empty"),
    (HDF5_SIGNATURE + bytes(64), "an HDF5 file (the Keras 2 format)"),
    (bytes(range(256)) * 4, "neither"),
])
def test_a_keras_file_that_is_no_zip_archive_is_named_for_what_it_is(tmp_path, content, what):
    path = tmp_path / "notmodel.keras"
    path.write_bytes(content)
    assert keras_file_problem(path) == (f"{path} is not a Keras model file "
                                        f"(a .keras file is a zip archive; this one is {what})")


def test_a_zip_archive_or_a_missing_file_is_left_to_the_loader(tmp_path):
    archive = tmp_path / "model.keras"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("config.json", "{}")
    assert keras_file_problem(archive) is None
    assert keras_file_problem(tmp_path / "gone.keras") is None  # "does not exist" is the caller's line
