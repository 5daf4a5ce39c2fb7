"""TD3 on Hopper-v5, 100k steps: how much of a run's outcome is its seed, and how SB3's
and rlamd's outcomes compare once rounding is known to decide a run.

Reads the stored evaluations (mean return of 10 episodes of the mean action) of
- SB3 2.9.2 on seeds 1-11 (``td3_hopper_100k_parity``, ``td3_hopper_100k_pair11``);
- SB3 with fused Adam on some of those seeds (``sb3_fused.py`` here): each shares its seed's
  initial weights and 10k warm-up steps with the stored run and parts from it by rounding;
- SB3 and rlamd on new seeds (``td3_hopper_100k_more_seeds``);
- rlamd under the per-stream seeds (``td3_hopper_100k_seeding`` 1-8, ``pair11``).

and prints each group at 100k and over the curve (each run's mean over its evaluations
10k-100k), how many runs passed 1,500 at 100k, and the gaps with Welch's 95% interval and
the Mann-Whitney p-value (:func:`rlamd.sweep.stats.gap_lines`).

    .venv/bin/python results/td3_hopper_100k_sb3_fused/compare.py > output.txt
"""

import statistics
from pathlib import Path

from rlamd.logger import read_evals
from rlamd.sweep.stats import gap_lines

HERE = Path(__file__).parent
RESULTS = HERE.parent


def _seeds(folder: Path, side: str) -> dict[int, Path]:
    found = folder.glob(f"seed*/{side}/evals.csv")
    got = {int(p.parts[-3][4:]): p for p in found if 100_000 in read_evals(p)}
    return dict(sorted(got.items()))


def figure(path: Path, what: str) -> float:
    got = read_evals(path)
    return got[100_000] if what == "at 100k" else statistics.mean(got.values())


def main() -> None:
    stored = {**_seeds(RESULTS / "td3_hopper_100k_parity", "sb3")}
    stored.update(_seeds(RESULTS / "td3_hopper_100k_pair11", "sb3"))
    fused = _seeds(HERE, "sb3")
    more = RESULTS / "td3_hopper_100k_more_seeds"
    rlamd = {**_seeds(RESULTS / "td3_hopper_100k_seeding", "rlamd")}
    rlamd.update(_seeds(RESULTS / "td3_hopper_100k_pair11", "rlamd"))
    rlamd.update(_seeds(more, "rlamd"))
    fresh = [*fused.values(), *_seeds(more, "sb3").values()]
    runs = {
        "SB3, stored, the fused seeds": [stored[s] for s in fused],
        "SB3, fused Adam": list(fused.values()),
        "SB3, stored, seeds 1-11": list(stored.values()),
        "SB3, new runs (fused, new seeds)": fresh,
        "SB3, all runs": [*stored.values(), *fresh],
        "rlamd, per-stream seeds": list(rlamd.values()),
    }
    print(f"fused Adam on seeds {list(fused)}; new seeds {list(_seeds(more, 'sb3'))}; "
          f"rlamd on seeds {list(rlamd)}")  # fmt: skip
    for name, paths in runs.items():
        took = sum(figure(p, "at 100k") > 1_500 for p in paths)
        print(f"  {name}: {took} of {len(paths)} runs past 1,500 at 100k")
    for what in ("at 100k", "over the curve"):
        g = {name: [figure(p, what) for p in paths] for name, paths in runs.items()}
        print(what)
        gaps = [
            ("fused - stored, same seeds", g["SB3, fused Adam"], g["SB3, stored, the fused seeds"]),
            ("SB3 new runs - stored 1-11", g["SB3, new runs (fused, new seeds)"],
             g["SB3, stored, seeds 1-11"]),
            ("rlamd - SB3 stored 1-11", g["rlamd, per-stream seeds"], g["SB3, stored, seeds 1-11"]),
            ("rlamd - SB3 all runs", g["rlamd, per-stream seeds"], g["SB3, all runs"]),
        ]  # fmt: skip
        print("\n".join(gap_lines(g, gaps)))


if __name__ == "__main__":
    main()
