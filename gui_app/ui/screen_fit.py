"""Top-level windows that fit the screen they open on, title bar and frame included.

A window's ``resize()`` sets the size of its *contents*; the window manager adds a title bar and a
border around them. Sizing the main window to the screen's available geometry therefore put its
status bar 25 px below a 1280x720 screen under a real window manager, and fixed first sizes (the
sweep window's 1100x760, the Compare window's 1000x720) hid their bottom buttons. Before a window
is shown Qt does not know its frame (``frameGeometry() == geometry()``): the window manager tells
it once it has reparented the window, which arrives as a Move or Resize event a few milliseconds
after the show. So :class:`ScreenFit` sizes a window with the frame it last saw on any window of
the application (or an estimate before the first one), and during a short while after each show
corrects the size and position with the real frame: never larger than the room the screen leaves
(panels and docks excluded), and grown back to the size asked for when the estimate was too
generous (no window manager at all: no frame). After that while the user's own resizing and moving
are left alone.

    ScreenFit(window, preferred=QSize(1100, 760))   # in the window's __init__, instead of resize()
"""
from __future__ import annotations

import time
from typing import cast

from PySide6.QtCore import QEvent, QMargins, QObject, QRect, QSize, QTimer
from PySide6.QtGui import QGuiApplication, QScreen
from PySide6.QtWidgets import QWidget

SETTLE_S = 3.0  # after a show: how long the window manager's placement is corrected (a loaded machine is slow)
CHECK_MS = (50, 250, 600)  # the checks after a show, for window managers that send no Move
ESTIMATE = QMargins(4, 32, 4, 6)  # a frame before any was seen: a title bar of a common desktop, a thin border

_seen_frame: QMargins | None = None  # the last real frame a window of this application had


def frame_margins(window: QWidget) -> QMargins:
    """The frame the window manager put around ``window`` (zero before it is shown and placed)."""
    frame, inner = window.frameGeometry(), window.geometry()
    return QMargins(inner.left() - frame.left(), inner.top() - frame.top(), frame.right() - inner.right(),
                    frame.bottom() - inner.bottom())


def plausible(frame: QMargins) -> bool:
    """A frame a window manager draws: a border of a few pixels, a title bar. Qt reports nonsense
    (a 1x1 frame: negative margins) when it measured the window manager's frame window before that
    was sized, and keeps it until the window's next configure event."""
    return all(0 <= side <= 200 for side in (frame.left(), frame.top(), frame.right(), frame.bottom()))


def available_room(window: QWidget) -> QRect:
    """The screen's available geometry (without panels and docks) where ``window`` is, or opens."""
    # The stubs say screen() is never None; Qt returns null for a widget not yet on any screen.
    screen = cast("QScreen | None", window.screen()) or QGuiApplication.primaryScreen()
    return screen.availableGeometry() if screen is not None else QRect(0, 0, 1280, 720)


def largest_size(window: QWidget, frame: QMargins | None = None) -> QSize:
    """The largest contents size whose frame fits the available room."""
    frame = frame if frame is not None else (_seen_frame or ESTIMATE)
    room = available_room(window)
    return QSize(room.width() - frame.left() - frame.right(), room.height() - frame.top() - frame.bottom())


def grow_to_fit(window: QWidget) -> None:
    """Make ``window`` tall enough for its layout at its width, within the screen. A top-level
    layout does not grow its window for a word-wrapped label whose text grew after the show (an
    error naming a long path): Qt squeezed the fields above it to slivers instead."""
    layout = window.layout()
    if layout is None:
        return
    layout.activate()
    needed = layout.totalHeightForWidth(window.width()) if layout.hasHeightForWidth() else layout.sizeHint().height()
    if needed > window.height():
        window.resize(window.width(), min(needed, largest_size(window).height()))


class ScreenFit(QObject):
    """Keeps ``window`` (a top-level widget) inside the available room of its screen, frame included;
    ``preferred`` is its first size, bounded by that room."""

    def __init__(self, window: QWidget, preferred: QSize | None = None) -> None:
        super().__init__(window)
        self._window = window
        self._preferred = preferred
        self._asked: QSize | None = None  # the size this object set last (a size the user chose is kept)
        self._settle_until = 0.0
        self._framed = QMargins()  # the frame the last correction used
        if preferred is not None:
            self._apply(None)
        window.installEventFilter(self)

    def set_preferred(self, size: QSize) -> None:
        """A new first size (a restored window has none: pass the size it had)."""
        self._preferred = size
        self._apply(None)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        kind = event.type()
        if kind == QEvent.Type.Show and watched is self._window:
            self._settle_until = time.monotonic() + SETTLE_S
            self._apply(None)
            for delay in CHECK_MS:
                QTimer.singleShot(delay, self, lambda last=delay == CHECK_MS[-1]: self._placed(last))
        elif kind in (QEvent.Type.Move, QEvent.Type.Resize) and watched is self._window and self._settling() \
                and frame_margins(self._window) != self._framed:
            self._placed(False)  # the window manager (re)framed the window; a resize by the program is left alone
        return False

    def _settling(self) -> bool:
        return time.monotonic() < self._settle_until

    def settled(self) -> bool:
        """The window manager's placement is no longer corrected: a resize now is the user's or
        the program's own, and stays."""
        return not self._settling()

    def _placed(self, last: bool) -> None:
        """The window manager may have framed the window: fit with the frame it really has. No
        frame yet is taken for no window manager only at the last check (a window manager
        reparents the window some milliseconds after the show)."""
        global _seen_frame
        window = self._window
        if not window.isVisible() or not (self._settling() or last):
            return
        frame = frame_margins(window)
        if (frame.isNull() and not last) or not plausible(frame):
            return  # not framed yet, or measured too early: the estimate stands
        if not frame.isNull():
            _seen_frame = frame
        self._framed = frame
        self._apply(frame)

    def _apply(self, frame: QMargins | None) -> None:
        window = self._window
        if window.isMaximized() or window.isFullScreen():
            return  # the window manager fits those
        room = available_room(window)
        largest = largest_size(window, frame)
        size = window.size()
        if self._preferred is not None and (self._asked is None or size == self._asked):
            size = self._preferred  # still the size asked for: the room may now allow more of it
        size = size.boundedTo(largest).expandedTo(window.minimumSize())
        if size != window.size():
            window.resize(size)
        if self._preferred is not None:
            self._asked = window.size()
        if frame is None:
            return  # not placed yet: the window manager or Qt chooses where
        margins = frame if not frame.isNull() else QMargins()
        outer = QSize(window.width() + margins.left() + margins.right(),
                      window.height() + margins.top() + margins.bottom())
        position = window.frameGeometry().topLeft()
        x = max(room.left(), min(position.x(), room.left() + room.width() - outer.width()))
        y = max(room.top(), min(position.y(), room.top() + room.height() - outer.height()))
        if (x, y) != (position.x(), position.y()):
            window.move(x, y)  # a top-level's move() places its frame
