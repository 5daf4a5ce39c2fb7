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


def test_comparison_lines_use_the_last_mark_two_runs_a_side_reached():
    pytest.importorskip("scipy")
    mod = _script()
    marks = [10_000, 20_000, 30_000]
    ours = [{10_000: 5.0, 20_000: 50.0, 30_000: 500.0}, {10_000: 7.0, 20_000: 70.0}]
    theirs = [{10_000: 1.0, 20_000: 10.0, 30_000: 100.0}, {10_000: 3.0, 20_000: 30.0}]
    at, curve, legend = mod.compare_lines(ours, theirs, marks)
    # 30k is left out (the second seeds stopped at 20k): at 20k the means are 60 and 20
    assert at.startswith("at 20k, 2 and 2 seeds: rlamd - SB3 mean +40 [")
    assert "P(rlamd > SB3) 1.00 (Mann-Whitney p = 0.33)" in at
    # per seed over 10k-20k: (27.5, 38.5) against (5.5, 16.5): gap 22
    assert curve.startswith("mean of the evaluations 10k-20k, 2 and 2 seeds: rlamd - SB3 mean +22")
    assert "Welch" in legend
    # a third rlamd seed that stopped at 10k is left out, and said to be
    lines = mod.compare_lines([*ours, {10_000: 9.0}], theirs, marks)
    assert lines[0].startswith("at 20k, 2 and 2 seeds:")
    assert lines[-1] == "(1 run(s) that stopped before 20k left out)"
    # one shared evaluation: no curve line
    one = mod.compare_lines([{10_000: 1.0}, {10_000: 2.0}], [{10_000: 0.5}, {10_000: 1.5}], marks)
    assert len(one) == 2 and one[0].startswith("at 10k, 2 and 2 seeds: rlamd - SB3 mean +0.50")
    # one run a side cannot be compared; no SB3 runs at all neither: said, not left blank
    assert mod.compare_lines(ours[:1], theirs, marks) == [
        "(no evaluation that two runs a side reached: no comparison)"
    ]
    assert mod.compare_lines(ours, [{}, {}], marks) == [
        "(no SB3 evaluations here: nothing to compare)"
    ]


def _race(root: Path, seed: int, ours: dict[int, float], theirs: dict[int, float]) -> None:
    for side, rows in (("rlamd", ours), ("sb3", theirs)):
        folder = root / f"seed{seed}" / side
        folder.mkdir(parents=True)
        lines = ["step,mean,std,episodes"] + [f"{s},{r},0,10" for s, r in rows.items()]
        (folder / "evals.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_summary_has_one_row_per_race_with_its_gaps(tmp_path):
    pytest.importorskip("scipy")
    mod = _script()
    ahead, short = tmp_path / "ahead", tmp_path / "short"
    for seed, (a, b) in enumerate([(300.0, 100.0), (500.0, 200.0), (400.0, 300.0)], 1):
        _race(ahead, seed, {1000: a / 10, 2000: a}, {1000: b / 10, 2000: b})
    _race(short, 1, {1000: 1.0, 2000: 4.0}, {1000: 2.0, 2000: 3.0})
    apart, big = tmp_path / "apart", tmp_path / "big"
    _race(apart, 1, {1000: 1.0}, {2000: 2.0})
    _race(big, 1, {1000: 900.0, 2000: 1708.0}, {1000: 1000.0, 2000: 1764.0})
    header, rule, first, second, third, fourth = mod.summary([ahead, short, apart, big])
    assert len({line.count("|") for line in (header, rule, first, second, third, fourth)}) == 1
    cells = [c.strip() for c in first.strip("|").split("|")]
    assert cells[:5] == ["ahead", "3 / 3", "2k", "400 ± 100", "200 ± 100"]
    assert cells[5].startswith("+200 [")  # 400 - 200 at 2k
    assert cells[6].startswith("+110 [")  # means over 1k-2k: 220 against 110
    # over the curve rlamd's 165, 275, 220 against 55, 110, 165: 8 of 9 pairs and a tie
    assert cells[7].startswith("0.94 (") and cells[8] == "-"  # no logs: no rates
    # one seed a side: its values and gaps, without spread, interval or p-value
    row = [c.strip() for c in second.strip("|").split("|")]
    assert row[1:] == ["1 / 1", "2k", "4.00", "3.00", "+1.00", "+0.00", "-", "-"]
    row = [c.strip() for c in third.strip("|").split("|")]
    assert row[1:3] == ["1 / 1", "no evaluation that a run a side reached: no comparison"]
    # a lone gap takes its decimals from the values it separates: -56 beside 1,764, not -56.0
    row = [c.strip() for c in fourth.strip("|").split("|")]
    assert row[3:7] == ["1,708", "1,764", "-56", "-78"]  # over the curve 1,304 against 1,382


def test_summary_refuses_folders_that_hold_no_race(tmp_path):
    import subprocess
    import sys

    (tmp_path / "empty").mkdir()
    got = subprocess.run(
        [sys.executable, str(SCRIPT), "--summary", str(tmp_path / "empty"), str(tmp_path / "x")],
        capture_output=True,
        text=True,
    )
    assert got.returncode == 2
    assert "empty (no seed folders in it)" in got.stderr
    assert "x (no such folder)" in got.stderr


def _rates(run: Path, ours: list[float], theirs_per_interval: float) -> None:
    lines = [f"step {i},000/9,000 | SPS 1 | upd/s {r} | score 0" for i, r in enumerate(ours, 1)]
    (run / "rlamd.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = ["step,seconds,updates"] + [
        f"{i},{i}.0,{int(i * theirs_per_interval)}" for i in range(5)
    ]
    (run / "sb3" / "progress.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def test_updates_per_second_are_compared_only_for_seeds_run_side_by_side(tmp_path):
    mod = _script()
    for seed in (1, 2):
        _race(tmp_path, seed, {1000: 1.0}, {1000: 1.0})
        # rlamd: the first interval straddles the start of learning and is dropped
        _rates(tmp_path / f"seed{seed}", [5.0, 30.0, 30.0, 30.0], 20.0)
    (tmp_path / "seed2" / mod.PAIR).write_text("side by side\n", encoding="utf-8")
    runs = sorted(tmp_path.glob("seed*"))
    assert mod.pair_ratios(runs) == [("seed2", pytest.approx(1.5))]  # 30 against 20
    assert mod.summary([tmp_path])[2].endswith("| 1.50x (1) |")


def test_the_continuous_report_counts_each_sides_seeds(tmp_path, capsys):
    """A side with fewer finished seeds (SB3's runs copied beside a rerun of ours) is
    said with its own count, not the number of seed folders."""
    pytest.importorskip("scipy")
    mod = _script()
    for seed in (1, 2, 3):
        _race(tmp_path, seed, {1000: 1.0, 2000: 2.0}, {1000: 1.5, 2000: 2.5})
    mod.report_evals(tmp_path, "three")
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("three: mean evaluation return over 3 seeds (mean"), first
    (tmp_path / "seed3" / "rlamd" / "evals.csv").unlink()
    mod.report_evals(tmp_path, "three")
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("three: mean evaluation return over 2 (rlamd) / 3 (SB3) seeds"), first
