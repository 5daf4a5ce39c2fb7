"""TD3 on Hopper-v5, 100k env steps: do rlamd's stratified uniform draws explain its lag
behind SB3 over the curve?

Reads the stored evaluations (mean return of 10 episodes of the mean action) of
- rlamd, stratified uniform draws (today's default): results/td3_hopper_100k_parity;
- rlamd, independent uniform draws (SB3's rule, ``iid_sampling.py`` here): seedS here;
- SB3 2.9.2 with the RL Zoo's settings: the parity folder's sb3 runs (deterministic per
  seed on this CPU, so the same seed's SB3 run is the same run whichever rlamd it faced);

and prints, at 100k and over the curve (each run's mean over its evaluations 10k-100k),
each group on the seeds the independent runs cover, and the gaps with Welch's 95%
interval and the Mann-Whitney p-value (:func:`rlamd.sweep.stats.gap_lines`).

    .venv/bin/python results/td3_hopper_100k_iid/compare.py
"""

import statistics
from pathlib import Path

from rlamd.logger import read_evals
from rlamd.sweep.stats import gap_lines

HERE = Path(__file__).parent
PARITY = HERE.parent / "td3_hopper_100k_parity"


def figure(path: Path, what: str) -> float:
    got = read_evals(path)
    return got[100_000] if what == "at 100k" else statistics.mean(got.values())


def main() -> None:
    seeds = sorted(int(p.name[4:]) for p in HERE.glob("seed*") if (p / "rlamd/evals.csv").exists())
    every = sorted(int(p.name[4:]) for p in PARITY.glob("seed*"))
    print(f"independent draws on seeds {seeds}; the parity runs on seeds {every}")
    for what in ("at 100k", "over the curve"):
        g = {
            "rlamd, stratified": [figure(PARITY / f"seed{s}/rlamd/evals.csv", what) for s in seeds],
            "rlamd, independent": [figure(HERE / f"seed{s}/rlamd/evals.csv", what) for s in seeds],
            "SB3": [figure(PARITY / f"seed{s}/sb3/evals.csv", what) for s in seeds],
        }
        print(what)
        sb3_all = [figure(PARITY / f"seed{s}/sb3/evals.csv", what) for s in every]
        gaps = [
            ("rlamd stratified - SB3, these seeds", g["rlamd, stratified"], g["SB3"]),
            ("rlamd independent - SB3, these seeds", g["rlamd, independent"], g["SB3"]),
            ("rlamd independent - SB3, all SB3 seeds", g["rlamd, independent"], sb3_all),
            ("rlamd independent - stratified", g["rlamd, independent"], g["rlamd, stratified"]),
        ]
        print("\n".join(gap_lines(g, gaps)))


if __name__ == "__main__":
    main()
