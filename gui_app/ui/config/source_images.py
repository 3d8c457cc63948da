"""SourceImagesRow (part of the DatasetForm): what the chosen images really are, and the size and
colour the form sets from them or proposes.

8x8 grey digits trained at the default 32x32 RGB gave a model of 923,914 parameters instead of
38,602, and nothing said why. When an image folder (or a prepared TFRecord folder) is chosen,
its headers are read (gui_app.core.image_files: a few per class) before the first inspection:
size fields the user has not set are filled from them; fields the user has set stay, and the
row proposes the images' own size and colour with one button.
"""
from __future__ import annotations

from typing import Any, Callable

from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from gui_app.core.config import DatasetConfig

DEFAULT = (*DatasetConfig().image_size, DatasetConfig().color_mode)
MIN_SIZE, MAX_SIZE = 8, 1024  # dataset.image_size's range
MAX_FILLED = 256  # larger photos are not trained at full size unasked: the user picks a size


def describe(size: tuple[int, int], color_mode: str) -> str:
    return f"{size[0]}×{size[1]} {'grey' if color_mode == 'grayscale' else 'RGB'}"


class SourceImagesRow(QWidget):
    """``follow(info, current, may_fill)``: the images' description (``source_images`` of
    inspect) and the form's (height, width, color_mode); calls ``apply(height, width,
    color_mode)`` to fill the form, when ``may_fill`` (the user chose these images now, not a
    loaded config) and the size is not the user's own."""

    def __init__(self, apply: Callable[[int, int, str], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._apply = apply
        self._filled: tuple[int, int, str] | None = None  # what the row set last (the user has not changed it)
        self._proposal: tuple[int, int, str] | None = None
        self._source = ""  # "8×8 grey"
        self.note = QLabel(wordWrap=True)
        self.use_button = QPushButton()
        self.use_button.clicked.connect(self._on_use)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note, 1)
        layout.addWidget(self.use_button)
        self.clear()

    def clear(self) -> None:
        self.note.clear()
        self._proposal = None
        self.use_button.hide()
        self.hide()  # an empty row would leave a gap in the form

    def follow(self, info: dict[str, Any] | None, current: tuple[int, int, str], may_fill: bool = True) -> None:
        self.clear()
        if not info:
            return
        height, width = info["size"]
        colour = info["color_mode"]
        fits = not info.get("varied") and MIN_SIZE <= min(height, width) and max(height, width) <= MAX_SIZE
        wanted = (height, width, colour) if fits else (*current[:2], colour)
        source = self._source = ("sizes vary, mostly " if info.get("varied") else "") + describe((height, width),
                                                                                                  colour)
        self.show()
        if wanted == current:
            self.note.setText(f"The images are {source}: size and colour set from them." if current == self._filled
                              else f"The images are {source}.")
            return
        untouched = may_fill and current in (DEFAULT, self._filled)
        if untouched and (not fits or max(height, width) <= MAX_FILLED):
            self._fill(wanted)
            return
        self._proposal = wanted
        self.show()
        self.note.setText(f"The images are {source}; training resizes them to {describe(current[:2], current[2])}.")
        self.use_button.setText(f"Use {describe(wanted[:2], wanted[2])}")
        self.use_button.show()

    def _fill(self, wanted: tuple[int, int, str]) -> None:
        self.clear()
        self._filled = wanted
        self._apply(*wanted)
        self.show()
        self.note.setText(f"The images are {self._source}: size and colour set from them.")

    def _on_use(self) -> None:
        if self._proposal is not None:
            self._fill(self._proposal)
