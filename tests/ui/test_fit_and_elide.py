"""The pieces that keep windows on a small screen and texts readable, offscreen (the whole windows on
a real 1280x720 screen with a window manager: test_laptop_screen.py): ScreenFit's first size and
grow_to_fit, the elided combo box, the step split's legend off its charts, integer ticks on the
sweep's trial and epoch axes, the importance chart's note inside its chart, the training figures wrapped."""
from __future__ import annotations

from PySide6.QtCore import QMargins, QSize
from PySide6.QtWidgets import QApplication, QDialog, QLabel, QLineEdit, QVBoxLayout, QWidget

from gui_app.core.answers import SweepStatus
from gui_app.ui.charts.plot import IntegerAxis
from gui_app.ui.labels import ElidedComboBox
from gui_app.ui.screen_fit import ESTIMATE, ScreenFit, available_room, grow_to_fit, plausible


def test_a_first_size_larger_than_the_screen_is_bounded_by_it_frame_included(qtbot, monkeypatch):
    from gui_app.ui import screen_fit

    monkeypatch.setattr(screen_fit, "_seen_frame", None)  # as at launch: no window of this process framed yet
    window = QWidget()
    qtbot.addWidget(window)
    room = available_room(window)
    ScreenFit(window, QSize(room.width() * 2, room.height() * 2))
    # Before the show the frame is unknown: the estimate of a title bar and borders is left free.
    assert window.width() <= room.width() - ESTIMATE.left() - ESTIMATE.right()
    assert window.height() <= room.height() - ESTIMATE.top() - ESTIMATE.bottom()
    small = ScreenFit(QWidget(), QSize(300, 200))._window
    assert small.size() == QSize(300, 200)  # a size that fits is kept
    window.show()
    # Once shown, the frame is known (offscreen: 2 px all round): the window and its frame take the whole room.
    qtbot.waitUntil(lambda: window.frameGeometry() == room, timeout=5000)
    assert window.geometry() != window.frameGeometry()


def test_a_frame_measured_before_the_window_manager_sized_it_is_not_taken():
    assert plausible(QMargins(1, 20, 1, 5)) and plausible(QMargins())  # openbox's; none
    assert not plausible(QMargins(1, 20, -519, -432))  # Qt's 1x1 frame around a 520x437 dialog


def test_a_message_that_grows_after_the_show_grows_the_dialog_not_squeezes_its_fields(qtbot):
    dialog = QDialog()
    qtbot.addWidget(dialog)
    fields = [QLineEdit() for _ in range(4)]
    message = QLabel(wordWrap=True)
    layout = QVBoxLayout(dialog)
    for field in fields:
        layout.addWidget(field)
    layout.addWidget(message)
    dialog.resize(400, layout.sizeHint().height())
    dialog.show()
    before = dialog.height()
    message.setText("cannot write the hosts file (/tmp/" + "a-long-folder/" * 12 + "hosts.json): permission denied")
    grow_to_fit(dialog)
    QApplication.processEvents()
    assert dialog.height() > before and dialog.width() == 400
    assert all(field.height() >= field.sizeHint().height() for field in fields)
    assert message.height() >= message.heightForWidth(message.width())


def test_a_narrow_combo_box_cuts_its_text_and_tells_it_whole_before_its_own_tip(qtbot):
    box = ElidedComboBox()
    qtbot.addWidget(box)
    long_text = "Multi-worker mirrored (several processes or machines)"
    box.addItems(["Mirrored", long_text])
    box.setToolTip("How the replicas are spread")
    box.setCurrentIndex(1)
    assert box.minimumSizeHint().width() < box.fontMetrics().horizontalAdvance(long_text) / 2  # never widens a form
    box.resize(160, box.sizeHint().height())
    box.show()
    QApplication.processEvents()
    assert box.is_elided() and box.toolTip() == f"{long_text}\n\nHow the replicas are spread"
    box.setCurrentIndex(0)  # a short text fits: only the tip
    assert not box.is_elided() and box.toolTip() == "How the replicas are spread"
    box.setCurrentIndex(1)
    box.resize(box.sizeHint())
    QApplication.processEvents()
    assert not box.is_elided() and box.toolTip() == "How the replicas are spread"


def test_trials_and_epochs_tick_on_integers_only():
    axis = IntegerAxis("bottom")
    for low, high in ((-0.1, 2.1), (0.9, 3.1), (0, 1), (0, 250)):
        ticks = [v for _, values in axis.tickValues(low, high, 400) for v in values]
        assert ticks and all(v == round(v) for v in ticks), (low, high, ticks)
    assert {0.0, 1.0, 2.0} <= {v for _, values in axis.tickValues(-0.1, 2.1, 400) for v in values}


def test_the_sweep_charts_count_trials_and_epochs_and_keep_their_note_inside(qtbot):
    from gui_app.ui.sweep.charts import SweepCharts

    charts = SweepCharts()
    qtbot.addWidget(charts)
    charts.resize(900, 500)
    charts.show()
    assert isinstance(charts.best_plot.getAxis("bottom"), IntegerAxis)
    assert isinstance(charts.curves_plot.getAxis("bottom"), IntegerAxis)
    charts.show_status(SweepStatus(sweep_dir="s"), ())
    qtbot.waitUntil(lambda: charts.note.toPlainText() == "Importance needs two completed trials", timeout=5000)
    QApplication.processEvents()
    assert charts.importance_plot.vb.sceneBoundingRect().contains(charts.note.sceneBoundingRect())


def test_the_step_split_legend_names_the_three_colours_on_a_row_of_its_own(qtbot):
    from gui_app.ui.tabs.step_split import LEGEND, StepSplitPanel

    panel = StepSplitPanel()
    qtbot.addWidget(panel)
    panel.resize(870, 260)
    panel.setVisible(True)
    QApplication.processEvents()
    assert [label.text for _, label in panel.legend.items] == list(LEGEND)
    assert [sample.item.opts["brush"] for sample, _ in panel.legend.items] == ["#4e79a7", "#bab0ac", "#edc948"]
    legend = panel.legend.sceneBoundingRect()
    for plot in (panel.bars_plot, panel.share_plot):
        assert not legend.intersects(plot.vb.sceneBoundingRect())  # over the charts, never on their lines
    assert panel.share_plot.legend is None


def test_the_training_figures_wrap_between_two_figures_never_inside_one(qtbot):
    from gui_app.ui.labels import ItemLine

    text = "step 40  ·  smoothed loss 1.0423  ·  smoothed accuracy 86.3%  ·  val loss 0.7912  ·  val accuracy 74.0%"
    line = ItemLine(text)
    qtbot.addWidget(line)
    assert line.text() == text and line.wordWrap()
    shown = QLabel.text(line)  # what Qt lays out: a break is allowed only after a dot
    assert [part.replace("\u00a0", " ") for part in shown.split("·  ")] == [
        "step 40  ", "smoothed loss 1.0423  ", "smoothed accuracy 86.3%  ", "val loss 0.7912  ", "val accuracy 74.0%"]
    height = line.fontMetrics().height()
    assert line.heightForWidth(2000) < 2 * height <= line.heightForWidth(400)  # a second line, nothing cut
    assert line.minimumSizeHint().width() < 400
