"""scripts/dqn_vs_sb3.py's report: the mean of the last 100 games at each mark, and no value
for a mark a run has not reached (a running or stopped run is not carried forward)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
