"""One rule for the mouse wheel over every chart: the plain wheel scrolls the page around the
chart (the Replicas tab), Ctrl+wheel zooms; a new run or another opened run shows everything."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QScrollArea

from test_charts import run_started, step

from gui_app.core.history import RunHistory
from gui_app.ui.charts.canvas import ChartCanvas
from gui_app.ui.tabs.replicas import ReplicasTab
from gui_app.ui.tabs.training import TrainingTab


def wheel(canvas: ChartCanvas, plot, clicks: int, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
    """The wheel turned ``clicks`` notches (negative: towards the user) over the middle of ``plot``."""
    centre = canvas.mapFromScene(plot.sceneBoundingRect().center())
    event = QWheelEvent(QPointF(centre), QPointF(canvas.viewport().mapToGlobal(centre)), QPoint(0, 0),
                        QPoint(0, 120 * clicks), Qt.MouseButton.NoButton, modifiers, Qt.ScrollPhase.NoScrollPhase,
                        False)
    QApplication.sendEvent(canvas.viewport(), event)


def replicas_with_steps(qtbot) -> ReplicasTab:
    tab = ReplicasTab()
    qtbot.addWidget(tab)
    tab.resize(700, 300)  # shorter than its charts: the tab scrolls
    tab.show()
    history = RunHistory()
    history.add([run_started(), *(step(n, loss=1.0 / n) for n in range(1, 51))])
    tab.set_history(history)
    tab.flush()
    QApplication.processEvents()
    return tab


def test_the_wheel_over_a_chart_scrolls_the_replicas_tab_and_ctrl_wheel_zooms(qtbot):
    tab = replicas_with_steps(qtbot)
    scroll = tab.findChild(QScrollArea)
    bar = scroll.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == 0
    view = tab.loss_plot.getViewBox()
    before = view.viewRange()
    wheel(tab._graphics, tab.loss_plot, -2)
    assert bar.value() > 0  # the page scrolled
    assert view.viewRange() == before  # the chart did not zoom
    wheel(tab._graphics, tab.loss_plot, 2, Qt.KeyboardModifier.ControlModifier)
    zoomed = view.viewRange()
    assert zoomed[0][1] - zoomed[0][0] < before[0][1] - before[0][0]  # zoomed in
    assert not any(view.autoRangeEnabled())


def test_a_new_run_shows_every_chart_whole_again(qtbot):
    tab = replicas_with_steps(qtbot)
    training = TrainingTab()
    qtbot.addWidget(training)
    training.resize(700, 500)
    training.show()
    training.set_history(tab.history)
    training.flush()
    plots = (tab.loss_plot, tab.grad_plot, training.loss_plot, training.accuracy_plot)
    for plot in plots:
        plot.getViewBox().scaleBy((0.5, 0.5))  # as Ctrl+wheel or a drag leaves it
        assert not any(plot.getViewBox().autoRangeEnabled())
    history = RunHistory()
    history.add([run_started(), *(step(n, loss=5.0 / n) for n in range(1, 21))])
    tab.set_history(history)
    training.set_history(history)
    for widget in (tab, training):
        widget.flush()
    QApplication.processEvents()  # pyqtgraph fits an auto range before it paints
    for plot in plots:  # the y axis follows the data, the x axis spans the new run's 100 planned steps
        view = plot.getViewBox()
        assert view.autoRangeEnabled()[1], plot.titleLabel.text
        low, high = view.viewRange()[0]
        assert low < 0 < 100 < high < 103, (plot.titleLabel.text, low, high)
    for plot in (tab.loss_plot, training.loss_plot):
        assert plot.getViewBox().viewRange()[1][1] > 4  # the new run's first loss (5) is in view


def test_every_chart_says_the_rule_in_its_tooltip(qtbot):
    tab = ReplicasTab()
    qtbot.addWidget(tab)
    canvases = tab.findChildren(ChartCanvas)
    assert len(canvases) >= 3  # the replica charts, the step split, the GPU panel
    assert all("Ctrl+wheel zooms" in canvas.toolTip() for canvas in canvases)


def test_a_plot_s_menu_is_built_on_the_first_right_click(qtbot):
    tab = TrainingTab()
    qtbot.addWidget(tab)
    view = tab.loss_plot.getViewBox()
    assert view.menu is None and view.menuEnabled()  # nothing built while the window starts
    menu = view.getMenu(None)
    assert menu is not None and view.getMenu(None) is menu and "View All" in [a.text() for a in menu.actions()]
