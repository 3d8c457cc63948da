"""``replica-studio report``: a run folder as one self-contained HTML page (gui_app/core/report).
The page is parsed back with html.parser: nothing in it points at the network, the run's figures
are in it, what the run wrote is escaped, and a long run stays small with its extremes kept."""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser

import numpy as np
import pytest
from report_runs import SPIKE, TEST_ACCURACY, write_run

from gui_app.core.report import build_report, write_report
from gui_app.core.report.downsample import keep_indices
from gui_app.core.report.svg import TOP
from gui_app.identity import app_command, app_env

NETWORK = ("http:", "https:", "//", "ftp:")


class Page(HTMLParser):
    """The tags, their attributes and the text of a page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.titles: list[str] = []  # the SVG <title>s: each line's extremes
        self._in_title = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        self._in_title = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in_title:
            self.titles.append(data)

    @property
    def all_text(self) -> str:
        return " ".join(self.text)

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for t, attrs in self.tags if t == tag]


def _offline(page: Page) -> None:
    """No script, and no attribute that loads or links anything but the page itself and data: URIs."""
    assert not page.named("script") and not page.named("link") and not page.named("iframe")
    for tag, attrs in page.tags:
        for name in ("src", "href", "srcset", "xlink:href", "action", "poster", "data"):
            if name not in attrs:
                continue
            value = (attrs[name] or "").strip().lower()
            assert not value.startswith(NETWORK), (tag, name, value)
            if name == "src":
                assert value.startswith("data:image/png;base64,"), (tag, value[:40])
    assert "url(" not in " ".join(page.text).lower().replace("url(s)", "")  # no CSS fetch in the style


def _png_size(uri: str) -> tuple[int, int]:
    import base64

    data = base64.b64decode(uri.split(",", 1)[1])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat = data.index(b"IDAT")
    length = struct.unpack(">I", data[idat - 4:idat])[0]
    assert len(zlib.decompress(data[idat + 4:idat + 4 + length])) == height * (width + 1)  # grey rows + filter
    return width, height


def test_the_report_holds_the_runs_figures(tmp_path):
    run = write_run(tmp_path / "run-a")
    path = write_report(run)
    assert path == run / "report.html"
    page = Page(path.read_text(encoding="utf-8"))
    _offline(page)
    text = page.all_text
    for figure in (f"{TEST_ACCURACY:.2%}", "mirrored, 2 replicas (CPU:0, CPU:1)", "digits (1,438 train / 359 test",
                   "mnist_cnn (12,345 parameters)", "replica 0 · CPU:0", "replica 1 · CPU:1",
                   "Slowest: replica 1 (CPU:1), 240 examples/s, 25% below the fastest", "560 (median of the steps)",
                   "zero", "two", "99.61%", "model-int8.tflite", "2.21.0", "Learning rate", "Where a step's time goes"):
        assert figure in text, figure
    images = [attrs["src"] for attrs in page.named("img")]
    assert [_png_size(src) for src in images] == [(8, 8)] * 5  # misclassified.npz's five, inside the page
    assert any("true zero, predicted one (75%)" == attrs["alt"] for attrs in page.named("img"))
    assert len(page.named("svg")) >= 5  # loss, accuracy, three per-replica charts (and the bars)
    captions = set(page.text)
    assert {"Learning rate", "GPU memory in use per replica (MiB)"} <= captions  # the decay; the GPUs' memory
    memory = next(t for t in page.titles if t.startswith("replica 1 · CPU:1: lowest 101"))
    assert memory.endswith("highest 101 at 1")  # MiB, constant: its first step
    assert 'http-equiv="Content-Security-Policy"' in path.read_text()
    assert "@media (max-width: 760px)" in path.read_text() and "@media print" in path.read_text()


def test_what_the_run_wrote_is_escaped(tmp_path):
    hostile = '<script>alert(1)</script>"><img src=http://evil.example/x>'
    run = write_run(tmp_path / "<b>run&co\"'", message=hostile, class_names=["<i>a</i>", hostile, "c&d"],
                    status="failed")
    html = build_report(run)
    page = Page(html)
    _offline(page)
    assert not page.named("b") and not page.named("i")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert hostile in page.all_text  # shown as written, as text
    assert page.all_text.count("<b>run&co\"'") >= 3  # the folder's name, as text: the title, the heading, the footer


def test_a_long_run_stays_small_and_keeps_its_spike(tmp_path):
    run = write_run(tmp_path / "long", steps=10_000, steps_per_epoch=1_000, spike_at=5_000)
    html = build_report(run)
    size = len(html.encode())
    assert size < 1_000_000, size  # measured: see docs/report.md
    page = Page(html)
    loss = next(attrs for attrs in page.named("path") if attrs.get("data-name") == "training loss")
    points = [tuple(map(float, p.split())) for p in loss["d"].replace("M", "L").split("L") if p]
    assert 100 < len(points) <= 1_200  # thinned, not 10,000
    assert min(y for _, y in points) == TOP  # the spike reaches the top of the plot...
    assert any(t.startswith("training loss:") and f"highest {SPIKE:g} at 5,000" in t for t in page.titles)


def test_thinning_keeps_every_extreme_and_gap():
    y = np.random.default_rng(1).normal(size=100_000)
    y[[777, 54_321]] = [50.0, -50.0]
    y[90_000:90_010] = np.nan
    keep = keep_indices(y)
    assert len(keep) < 1_300
    assert {777, 54_321, 0, 99_999} <= set(keep.tolist())
    assert 90_000 in keep  # the line breaks where the values stop
    for start in range(0, 100_000, 10_000):  # each stretch's extremes are kept
        chunk = y[start:start + 10_000]
        assert np.nanmax(chunk) in y[keep] and np.nanmin(chunk) in y[keep]


@pytest.mark.parametrize("case", ["missing", "not-a-run", "sweep", "output-is-a-folder", "unwritable", "empty"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    run = write_run(tmp_path / "run")
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep.json").write_text("{}")
    argv = {"missing": [str(tmp_path / "nope")], "not-a-run": [str(tmp_path)], "sweep": [str(tmp_path / "sweep")],
            "output-is-a-folder": [str(run), "-o", str(tmp_path)],
            "unwritable": [str(run), "-o", str(tmp_path / "no" / "such" / "r.html")],
            "empty": [str(run), "-o", ""]}[case]
    proc = subprocess.run(app_command("report", *argv), env=app_env(), capture_output=True, text=True, timeout=120)
    err = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(err) == 1 and err[0].startswith("replica-studio report: "), proc.stderr
    assert not (run / "report.html").exists()


def test_the_command_says_where_it_wrote(tmp_path):
    run = write_run(tmp_path / "run")
    proc = subprocess.run(app_command("report", str(run), "-o", str(tmp_path / "r.html"), "--json"), env=app_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    written = tmp_path / "r.html"
    assert answer == {"type": "report", "path": str(written), "size_bytes": written.stat().st_size}


@pytest.mark.slow
def test_the_report_of_a_run_the_engine_trained(trained_run, tmp_path):
    """The real engine's run (digits, two CPU replicas): its eval.json's accuracy, its replicas,
    its misclassified images."""
    out = write_report(trained_run, tmp_path / "real.html")
    page = Page(out.read_text(encoding="utf-8"))
    _offline(page)
    accuracy = json.loads((trained_run / "eval.json").read_text())["accuracy"]
    assert f"{accuracy:.2%}" in page.all_text
    assert "replica 0 · CPU:0" in page.all_text and "replica 1 · CPU:1" in page.all_text
    assert page.named("img"), "the misclassified images"
    assert out.stat().st_size < 500_000


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed here")
def test_chromium_renders_the_page(tmp_path):
    run = write_run(tmp_path / "run")
    page = write_report(run)
    for width in (1280, 390):  # a laptop and a phone
        shot = tmp_path / f"shot-{width}.png"
        subprocess.run(["chromium", "--headless", "--disable-gpu", "--no-sandbox", f"--window-size={width},2000",
                        f"--screenshot={shot}", page.as_uri()], check=True, timeout=120, capture_output=True)
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # drawn, not one blank colour
    pdf = tmp_path / "report.pdf"
    subprocess.run(["chromium", "--headless", "--disable-gpu", "--no-sandbox", "--no-pdf-header-footer",
                    f"--print-to-pdf={pdf}", page.as_uri()], check=True, timeout=120, capture_output=True)
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 20_000


def test_a_damaged_evaluation_is_named_not_fatal(tmp_path):
    run = write_run(tmp_path / "run")
    (run / "eval.json").write_text("{bad")
    (run / "misclassified.npz").write_bytes(b"not a zip")
    page = Page(build_report(run))
    text = page.all_text
    assert "Diagnosis" in text and "eval.json: cannot read the evaluation" in text
    assert "misclassified.npz: cannot read" in text
    assert "Slowest: replica 1" in text  # the rest of the run is there


def test_a_hundred_classes_show_their_commonest_mistakes_not_10000_cells(tmp_path):
    run = write_run(tmp_path / "run")
    matrix = np.eye(100, dtype=int) * 50
    matrix[3, 7], matrix[42, 41] = 9, 4
    evaluation = json.loads((run / "eval.json").read_text())
    evaluation.update(confusion_matrix=matrix.tolist(), class_names=[f"class {i}" for i in range(100)], per_class=[])
    (run / "eval.json").write_text(json.dumps(evaluation))
    html = build_report(run)
    assert "Most confused" in html and 'class="confusion"' not in html
    rows = Page(html).all_text
    assert rows.index("class 3 class 7 9 15.3%") < rows.index("class 42 class 41 4 7.4%")
    assert len(html.encode()) < 200_000
