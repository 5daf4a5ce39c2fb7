"""scripts/dqn_vs_sb3.py's report: the mean of the last 100 games at each mark, and no value
for a mark a run has not reached (a running or stopped run is not carried forward)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "dqn_vs_sb3.py"


def _script():
    spec = importlib.util.spec_from_file_location("dqn_vs_sb3", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _games(path: Path, rows: list[tuple[int, float]]) -> None:
    path.parent.mkdir(parents=True)
    lines = ["step,score,frames"] + [f"{s},{r},100" for s, r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_report_means_the_last_100_games_and_leaves_unreached_marks_empty(tmp_path, capsys):
    mod = _script()
    # rlamd: 300 games to 150k, scores 0..299 in order; SB3: stops at 110k
    _games(tmp_path / "rlamd" / "episodes.csv", [(500 * (i + 1), float(i)) for i in range(300)])
    _games(tmp_path / "sb3" / "episodes.csv", [(1_000 * (i + 1), 2.0) for i in range(110)])
    mod.report(tmp_path, 150_000)
    out = capsys.readouterr().out.splitlines()
    rlamd = next(line for line in out if line.startswith("rlamd")).split()[1:]
    sb3 = next(line for line in out if line.startswith("SB3")).split()[1:]
    # at 100k the rlamd games ending at <= 100k are games 0..199: the last 100 are 100..199
    assert rlamd == ["149.50", "249.50"]
    assert sb3 == ["2.00", "-"]


def test_comparison_lines_use_the_marks_every_run_reached():
    pytest.importorskip("scipy")
    mod = _script()
    marks = [10_000, 20_000, 30_000]
    ours = [{10_000: 5.0, 20_000: 50.0, 30_000: 500.0}, {10_000: 7.0, 20_000: 70.0}]
    theirs = [{10_000: 1.0, 20_000: 10.0, 30_000: 100.0}, {10_000: 3.0, 20_000: 30.0}]
    at, curve, legend = mod.compare_lines(ours, theirs, marks)
    # 30k is left out (the second seeds stopped at 20k): at 20k the means are 60 and 20
    assert at.startswith("at 20k, 2 and 2 seeds: rlamd - SB3 mean +40 ")
    assert "P(rlamd > SB3) 1.00 [1.00, 1.00]" in at
    # per seed over 10k-20k: (27.5, 38.5) against (5.5, 16.5): gap 22
    assert curve.startswith("mean of the evaluations 10k-20k, 2 and 2 seeds: rlamd - SB3 mean +22 ")
    assert "bootstrap" in legend
    # one run a side cannot be resampled: no lines rather than intervals of nothing
    assert mod.compare_lines(ours[:1], theirs, marks) == []
    assert mod.compare_lines([], [], marks) == []
