"""Help → Getting started: what each panel does, where runs live, how to open them elsewhere."""
from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

from gui_app.ui.screen_fit import ScreenFit


def getting_started_html(runs_dir: Path) -> str:
    runs = html.escape(str(runs_dir))
    return f"""
<h2>Getting started</h2>
<p>Replica Studio trains a model with a <code>tf.distribute</code> strategy and shows every
replica while it trains. The first launch is ready to go: the bundled <b>digits</b> dataset
(works offline), the small CNN and a mirrored strategy over the devices it found. Press
<b>Train</b> (Ctrl+R).</p>

<h3>The panels on the left</h3>
<ul>
<li><b>Devices</b> lists every GPU TensorFlow sees and the CPU. Tick the devices the mirrored
strategy replicates over. Without a GPU, <i>CPU replicas</i> splits the CPU into several
logical devices so you can still run several replicas.</li>
<li><b>Dataset</b>: choose its type, then <i>Open…</i> its file or folder (an <code>.npz</code>,
a folder of MNIST IDX files, a folder of images with one sub-folder per class, CIFAR batches,
TFRecord shards) or type its path. You can also drop a file or folder on the window. For an
image folder the form reads the images' size and colour and sets them (or offers them, when you
set a size yourself). The dataset and model are checked when you stop typing or leave the field;
the <i>Dataset</i> tab then shows samples and class counts.</li>
<li><b>Model</b>: the built-in models or your own <code>.keras</code> architecture, with its
parameter count and layers.</li>
<li><b>Strategy</b>: default (no distribution), one device, mirrored (synchronous replicas on
this machine), multi-worker mirrored (several processes or machines, each with its replicas)
or parameter servers (asynchronous workers that send their updates to the servers). It shows
the replicas the run will have, the global batch and the batch each replica gets.</li>
<li><b>Hyperparameters</b>: epochs, batch size, optimizer, learning rate and schedule, seed.</li>
</ul>
<p>A field with a bad value is marked in red, and <b>Train</b> stays disabled until every field
is valid and the last check of the dataset and model on the forms passed (its tooltip says what
it waits for; <i>Check again</i> repeats a failed check after you fixed the files).</p>

<h3>While it trains</h3>
<ul>
<li><b>Training</b> tab: loss and accuracy for every step (raw and smoothed), validation at each
epoch end, and the learning rate.</li>
<li><b>Replicas</b> tab: each replica's own loss and gradient norm before its gradients are
combined (the all-reduce; parameter-server workers send updates instead), and its examples per
second; the slowest replica is marked.</li>
<li><b>Pause</b> and <b>Stop</b> (Ctrl+.) are cooperative: a stopped run writes a checkpoint
and can be resumed from the runs list.</li>
<li><b>Evaluation</b> tab (after the run): test accuracy, the confusion matrix, precision,
recall and F1 per class, and the test images the model got wrong.</li>
<li><b>Try</b> tab: drop your own images on it to see the model's top-5 answers. The
<b>Export</b> menu writes the model as .keras, SavedModel, TFLite or ONNX and checks every file
against the trained model (a stopped run exports its last checkpoint).</li>
</ul>

<h3>Where runs are stored</h3>
<p>Each run is a folder in <code>{runs}</code> with its <code>config.json</code>, every event in
<code>events.jsonl</code>, <code>checkpoints/</code>, <code>model.keras</code> and
<code>eval.json</code>. The runs list at the bottom opens them again; select two to overlay
their curves.</p>

<h3>TensorBoard and the command line</h3>
<p>Every run also writes TensorBoard summaries:<br>
<code>pip install tensorboard</code><br>
<code>tensorboard --logdir "{runs}"</code></p>
<p>The same run configuration trains headless: <i>File → Save configuration…</i>, then<br>
<code>replica-studio train config.json</code> (after the README's quick start:
<code>.venv/bin/replica-studio</code>).</p>
"""


class GettingStartedDialog(QDialog):
    def __init__(self, runs_dir: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Getting started")
        ScreenFit(self, QSize(640, 680))
        browser = QTextBrowser(self)
        browser.setOpenExternalLinks(True)
        browser.setHtml(getting_started_html(runs_dir))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(browser)
        layout.addWidget(buttons)
        self.browser = browser
