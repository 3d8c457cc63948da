"""``replica-studio report SWEEP_DIR``: a sweep's page (gui_app/core/report/sweep_page.py) over the
window tests' real sweep folders (tests/ui/sweep_dirs.py): every trial in its row with the
settings it varied, the best named, the curves drawn, nothing from the network."""
from __future__ import annotations

import subprocess

from sweep_dirs import Trial, write_sweep

from gui_app.identity import app_command, app_env


def test_a_sweeps_report_names_its_trials_and_the_best(tmp_path):
    sweep = write_sweep(tmp_path / "sweeps", [Trial(0.003, 64, "completed", (0.5, 0.7, 0.81)),
                                              Trial(0.05, 32, "pruned", (0.3,)),
                                              Trial(0.0007, 128, "completed", (0.55, 0.75, 0.93))])
    proc = subprocess.run(app_command("report", str(sweep)), env=app_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    html = (sweep / "report.html").read_text(encoding="utf-8")
    assert "Best</dt><dd>trial 2: val_accuracy 0.9300" in html
    for name in ("trial 0", "trial 1", "trial 2", "Learning rate (training.learning_rate)", "0.0007", "stopped"):
        assert name in html, name
    assert "<script" not in html and "http://" not in html.replace("http-equiv", "")
    assert html.count('class="series"') >= 6  # a validation curve and a loss curve per trial
