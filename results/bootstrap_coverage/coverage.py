"""How often a 95% interval of rlamd-vs-peer statistics misses the truth when both groups of
runs come from one distribution (so the true mean gap is 0 and the true probability of
improvement 0.5): the percentile bootstrap (as rliable computes it) against Welch's t
interval, at 3-10 runs a side; and for one group (a sweep's configuration), the bootstrap
interval of the IQM against Student's t interval of the mean (the true IQM and mean are both
0). The basis of ``rlamd.sweep.stats.BOOTSTRAP_RUNS``.

    .venv/bin/python results/bootstrap_coverage/coverage.py [REPEATS]
"""

import sys

import numpy as np
import scipy.stats

from rlamd.sweep.stats import _improvement, compare, interval, t_interval


def bootstrap(x, y, statistic, seed):
    res = scipy.stats.bootstrap(
        (x, y),
        statistic,
        n_resamples=1000,
        vectorized=True,
        paired=False,
        axis=-1,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return res.confidence_interval.low, res.confidence_interval.high


def mean_gap(x, y, axis=-1):
    return x.mean(axis=axis) - y.mean(axis=axis)


def main(repeats: int) -> None:
    rng = np.random.default_rng(1)
    print(f"share of {repeats} draws whose 95% interval misses the truth (nominal 0.05)")
    print("runs a side   bootstrap, mean gap   bootstrap, P   Welch, mean gap")
    for n in (3, 5, 7, 10):
        misses = np.zeros(3)
        for r in range(repeats):
            x, y = rng.normal(size=n), rng.normal(size=n)
            lo, hi = bootstrap(x, y, mean_gap, r)
            p_lo, p_hi = bootstrap(x, y, _improvement, r)
            _, w_lo, w_hi = compare(x, y).mean_gap
            misses += [not lo <= 0 <= hi, not p_lo <= 0.5 <= p_hi, not w_lo <= 0 <= w_hi]
        share = misses / repeats
        print(f"{n:11d}   {share[0]:19.3f}   {share[1]:12.3f}   {share[2]:15.3f}")
    print("\none group")
    print("runs   bootstrap, IQM   Student t, mean")
    for n in (3, 5, 7, 10):
        misses = np.zeros(2)
        for r in range(repeats):
            x = rng.normal(size=n)
            lo, hi = interval([x], resamples=1000, seed=r)
            t_lo, t_hi = t_interval(x)
            misses += [not lo <= 0 <= hi, not t_lo <= 0 <= t_hi]
        share = misses / repeats
        print(f"{n:4d}   {share[0]:14.3f}   {share[1]:15.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
