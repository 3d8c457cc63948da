"""RunView: the base of every view of the run on screen (the chart tabs, their panels, the
Evaluation tab, the progress line).

A view is given the run's :class:`~gui_app.core.history.RunHistory` (``set_history``; ShownRun
gives all of them the same one) and subscribes to it: after each batch the history tells it which
parts changed (``_history_changed``, a mask of ``Part`` bits) and the view redraws those, through
its redraw throttle where it has one. It never folds events itself. Until it is given one, a view
shows an empty history of its own.
"""
from __future__ import annotations

from gui_app.core.history import Part, RunHistory


class RunView:
    """Mixin for a QWidget: ``history``, ``set_history``, and the two hooks below."""

    _history: RunHistory | None = None

    @property
    def history(self) -> RunHistory:
        if self._history is None:
            self.set_history(RunHistory())
        assert self._history is not None  # set_history() just set it
        return self._history

    def set_history(self, history: RunHistory) -> None:
        """Show ``history`` from now on (another run, or none: an empty one) and follow it."""
        if self._history is not None:
            self._history.unsubscribe(self._history_changed)
        self._history = history
        history.subscribe(self._history_changed)
        self._history_replaced()
        self._history_changed(Part.ALL)

    def _history_replaced(self) -> None:
        """Forget what was drawn of the previous run (curves, axes, cards)."""

    def _history_changed(self, changed: int) -> None:
        """Redraw what the ``changed`` parts of ``history`` show."""
        raise NotImplementedError
