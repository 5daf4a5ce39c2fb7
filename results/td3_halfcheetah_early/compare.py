"""TD3 on HalfCheetah-v5 at 20k and 30k env steps: was rlamd's early lag behind SB3 real?

Reads the stored evaluations (mean return of 10 episodes of the mean action) of
- rlamd, stratified uniform draws (today's default): results/td3_halfcheetah_100k_parity, seeds 1-6;
- rlamd, independent uniform draws (SB3's rule; results/td3_hopper_100k_iid/iid_sampling.py,
  30k steps): iid_seed1..6 here;
- SB3 2.9.2 with the RL Zoo's settings: the parity folder's seeds 1-6 and, run for this
  check (30k steps), sb3_seed7..12 here;

and prints each group and the gaps with Welch's 95% interval and the Mann-Whitney p-value
(:func:`rlamd.sweep.stats.gap_lines`).

    .venv/bin/python results/td3_halfcheetah_early/compare.py
"""

import csv
from pathlib import Path

from rlamd.sweep.stats import gap_lines

HERE = Path(__file__).parent
PARITY = HERE.parent / "td3_halfcheetah_100k_parity"


def at(path: Path, step: int) -> float:
    with open(path, encoding="utf-8") as f:
        return next(float(r["mean"]) for r in csv.DictReader(f) if int(r["step"]) == step)


def groups(step: int) -> dict[str, list[float]]:
    six = range(1, 7)
    return {
        "rlamd, stratified (seeds 1-6)": [
            at(PARITY / f"seed{s}/rlamd/evals.csv", step) for s in six
        ],
        "rlamd, independent (seeds 1-6)": [
            at(HERE / f"iid_seed{s}/rlamd/evals.csv", step) for s in six
        ],
        "SB3 (seeds 1-6)": [at(PARITY / f"seed{s}/sb3/evals.csv", step) for s in six],
        "SB3 (seeds 7-12)": [at(HERE / f"sb3_seed{s}/sb3/evals.csv", step) for s in range(7, 13)],
    }


def main() -> None:
    for step in (20_000, 30_000):
        g = groups(step)
        print(f"at {step // 1000}k steps")
        sb3 = g["SB3 (seeds 1-6)"] + g["SB3 (seeds 7-12)"]
        ours = g["rlamd, stratified (seeds 1-6)"]
        gaps = [
            ("SB3 seeds 7-12 - SB3 seeds 1-6", g["SB3 (seeds 7-12)"], g["SB3 (seeds 1-6)"]),
            ("rlamd stratified - SB3 seeds 1-6", ours, g["SB3 (seeds 1-6)"]),
            ("rlamd stratified - SB3 seeds 1-12", ours, sb3),
            ("rlamd independent - SB3 seeds 1-12", g["rlamd, independent (seeds 1-6)"], sb3),
        ]
        print("\n".join(gap_lines(g, gaps)))


if __name__ == "__main__":
    main()
