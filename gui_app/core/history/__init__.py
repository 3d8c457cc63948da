"""The run model: what the window shows of a run, folded from its events (Qt-free and
TensorFlow-free). :class:`RunHistory` holds the parts; see gui_app/core/history/run.py."""
from gui_app.core.history.run import Part, RunHistory

__all__ = ["Part", "RunHistory"]
