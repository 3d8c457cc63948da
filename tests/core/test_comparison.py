"""Comparing runs: the keys that differ, final figures, seed pairs grouped with mean ± std and bands."""
from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from compared_runs import write_run

from gui_app.core import events as ev
from gui_app.core.comparison import compare, differing_keys, read_figures
from gui_app.engine.commands.cli import main as cli_main


def test_three_runs_show_the_keys_that_differ_and_their_figures(tmp_path):
    runs = [write_run(tmp_path / "a", 0.001, 1, 0.9, 0.91), write_run(tmp_path / "b", 0.01, 1, 0.8, 0.82),
            write_run(tmp_path / "c", 0.003, 2, 0.7, 0.72, resumed_at=5)]
    figures = [read_figures(r) for r in runs]
    assert differing_keys([f.config for f in figures]) == ["training.learning_rate", "training.seed"]
    c = figures[2]
    assert (c.test_accuracy, c.val_accuracy, c.steps) == (0.72, pytest.approx(0.7), 10)
    assert c.val_loss == pytest.approx(0.3)
    assert c.duration == pytest.approx(12.0)  # 5 + 7 s of work; the hour between the two processes left out
    result = compare(figures)
    assert not result.grouped and result.keys == ["training.learning_rate", "training.seed"]
    header, cells = result.table()
    assert header == ["training.learning_rate", "training.seed", "runs", "test_accuracy", "val_accuracy", "val_loss",
                      "steps", "duration"]
    assert cells[1] == ["0.01", "1", "1", "0.8200", "0.8000", "0.2000", "10", "12"]
    assert cells[2][:3] == ["0.003", "2", "1"]


def test_a_seed_pair_is_one_row_with_mean_std_and_a_band(tmp_path, capfd):
    runs = [write_run(tmp_path / "s1", 0.01, 1, 0.8, 0.80), write_run(tmp_path / "s2", 0.01, 2, 0.9, 0.90),
            write_run(tmp_path / "other", 0.001, 1, 0.5, 0.50, steps=5)]
    result = compare([read_figures(r) for r in runs])
    assert result.grouped and result.keys == ["training.learning_rate"]
    pair, other = result.rows
    assert pair.seeds == [1, 2] and len(other.runs) == 1
    test = pair.stat("test_accuracy")
    assert (test.mean, test.std, test.count) == (pytest.approx(0.85), pytest.approx(np.std([0.8, 0.9], ddof=1)), 2)
    assert other.stat("test_accuracy").std is None
    band = pair.band("loss")
    assert list(band.steps) == list(range(1, 11))
    assert band.low[0] == pytest.approx(1 + 1.0) and band.high[0] == pytest.approx(2 + 1.0)  # seed is the offset
    assert band.mean[9] == pytest.approx(1.5 + 0.1)
    val = pair.band("val_accuracy")  # per epoch: the two seeds reached 0.8 and 0.9 at the end
    assert list(val.steps) == [1, 2] and list(val.low) == pytest.approx([0.4, 0.8])
    assert list(val.high) == pytest.approx([0.45, 0.9])
    header, cells = result.table()
    assert header[:3] == ["training.learning_rate", "seeds", "runs"]
    assert cells[0][:4] == ["0.01", "1,2", "2", "0.8500 ± 0.0707"]

    out = tmp_path / "table.csv"
    assert cli_main(["compare", *map(str, runs), "--csv", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [r["runs"] for r in rows] == ["2", "1"] and float(rows[0]["test_accuracy"]) == pytest.approx(0.85)
    assert float(rows[0]["test_accuracy_std"]) == pytest.approx(0.0707, abs=1e-4)
    assert capfd.readouterr().out.splitlines()[1].split()[:4] == ["0.01", "1,2", "2", "0.8500"]
    assert cli_main(["compare", *map(str, runs), "--json", "--no-group"]) == 0
    assert len(json.loads(capfd.readouterr().out)["rows"]) == 3
    assert cli_main(["compare", str(tmp_path / "missing")]) == 2
    assert capfd.readouterr().err.startswith("replica-studio compare: ")


def test_steps_written_again_after_a_resume_count_once(tmp_path):
    """Killed at step 10 after a checkpoint at step 6, resumed: steps 7-10 come again; the later ones count."""
    run = write_run(tmp_path / "r", 0.01, 1, 0.8, 0.8)
    again = [ev.RunStarted(time=2000.0, run_dir=str(run), config={}, resumed=True)]
    again += [ev.Step(time=2000.0 + s, step=s, epoch=2, loss=0.5, accuracy=0.9) for s in range(7, 11)]
    with (run / "events.jsonl").open("a") as out:
        out.write("".join(json.dumps(ev.encode(e)) + "\n" for e in again))
    figures = read_figures(run)
    assert list(figures.curve_steps) == list(range(1, 11))
    assert list(figures.curve_loss[6:]) == [0.5] * 4 and figures.curve_loss[5] == pytest.approx(1 / 6 + 1)
    pair = compare([figures, read_figures(write_run(tmp_path / "s", 0.01, 2, 0.8, 0.8))]).rows[0]
    assert list(pair.band("loss").steps) == list(range(1, 11))


def test_a_damaged_eval_file_does_not_fail_the_comparison(tmp_path, capfd):
    """eval.json is derived: the run's own eval event still gives its test accuracy."""
    good, damaged = write_run(tmp_path / "a", 0.001, 1, 0.9, 0.91), write_run(tmp_path / "b", 0.01, 1, 0.8, 0.82)
    (damaged / "eval.json").write_text("{not json", encoding="utf-8")
    figures = [read_figures(good), read_figures(damaged)]
    assert [f.test_accuracy for f in figures] == [0.91, 0.82]
    assert cli_main(["compare", str(good), str(damaged)]) == 0
    assert "0.8200" in capfd.readouterr().out
