"""TD3 on Hopper-v5, 100k env steps: do SB3's noisy warm-up actions explain rlamd's lag?

Reads the stored evaluations (mean return of 10 episodes of the mean action) of
- rlamd, uniform warm-up actions (its rule, under the per-stream seeds):
  results/td3_hopper_100k_seeding;
- rlamd, SB3's warm-up (uniform, plus the acting noise, clipped; ``noisy_warmup.py``
  here): seedS here, the same seeds, so each pair shares every random draw and differs
  only in the warm-up actions' noise;
- SB3 2.9.2 with the RL Zoo's settings: the seeding folder's copies of the parity runs;

and prints, at 100k and over the curve (each run's mean over its evaluations 10k-100k),
each group on the seeds the noisy runs cover, and the gaps with Welch's 95% interval and
the Mann-Whitney p-value (:func:`rlamd.sweep.stats.gap_lines`).

    .venv/bin/python results/td3_hopper_100k_noisy_warmup/compare.py
"""

import statistics
from pathlib import Path

from rlamd.logger import read_evals
from rlamd.sweep.stats import gap_lines

HERE = Path(__file__).parent
SEEDING = HERE.parent / "td3_hopper_100k_seeding"


def figure(path: Path, what: str) -> float:
    got = read_evals(path)
    return got[100_000] if what == "at 100k" else statistics.mean(got.values())


def main() -> None:
    seeds = sorted(int(p.name[4:]) for p in HERE.glob("seed*") if (p / "rlamd/evals.csv").exists())
    every = sorted(int(p.name[4:]) for p in SEEDING.glob("seed*") if (p / "sb3").exists())
    print(f"noisy warm-up on seeds {seeds}; SB3 on seeds {every}")
    for what in ("at 100k", "over the curve"):
        g = {
            "rlamd, uniform": [figure(SEEDING / f"seed{s}/rlamd/evals.csv", what) for s in seeds],
            "rlamd, noisy": [figure(HERE / f"seed{s}/rlamd/evals.csv", what) for s in seeds],
            "SB3": [figure(SEEDING / f"seed{s}/sb3/evals.csv", what) for s in seeds],
        }
        print(what)
        sb3_all = [figure(SEEDING / f"seed{s}/sb3/evals.csv", what) for s in every]
        gaps = [
            ("rlamd uniform - SB3, these seeds", g["rlamd, uniform"], g["SB3"]),
            ("rlamd noisy - SB3, these seeds", g["rlamd, noisy"], g["SB3"]),
            ("rlamd noisy - SB3, all SB3 seeds", g["rlamd, noisy"], sb3_all),
            ("rlamd noisy - uniform", g["rlamd, noisy"], g["rlamd, uniform"]),
        ]
        print("\n".join(gap_lines(g, gaps)))


if __name__ == "__main__":
    main()
