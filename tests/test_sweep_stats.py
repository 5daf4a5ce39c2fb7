"""The sweep's statistics against values worked out by hand (rlamd/sweep/stats.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("scipy")

from rlamd.sweep.stats import (
    BOOTSTRAP_RUNS,
    compare,
    gap_lines,
    interval,
    iqm,
    summarize,
    t_interval,
)


def test_iqm_is_the_mean_of_the_middle_half():
    assert iqm([1, 2, 3, 4, 5, 6, 7, 8]) == pytest.approx(4.5)  # (3 + 4 + 5 + 6) / 4
    # 5 runs: a quarter of 5 rounds down to 1 cut from each end, so the outlier is gone
    assert iqm([100, 2, 3, 1, 4]) == pytest.approx(3.0)  # (2 + 3 + 4) / 3
    assert math.isnan(iqm([]))


def test_two_runs_bootstrap_to_their_range():
    # resamples of [0, 10]: {0,0} -> 0 (1/4), {0,10} -> 5 (1/2), {10,10} -> 10 (1/4);
    # the 2.5th and 97.5th percentiles are the ends
    assert interval([[0.0, 10.0]], resamples=4000) == pytest.approx((0.0, 10.0))


def test_the_bootstrap_is_stratified():
    # task A [0, 10] resampled alone, task B [100, 100] alone: the pooled 4 runs' IQM is the
    # mean of the middle two: {0,0,100,100} -> 50 (1/4), {0,10,...} or {10,10,...} -> 55
    low, high = interval([[0.0, 10.0], [100.0, 100.0]], resamples=4000)
    assert (low, high) == pytest.approx((50.0, 55.0))
    # pooled into one stratum, a resample may draw four 0s: the interval reaches far lower
    pooled_low, _ = interval([[0.0, 10.0, 100.0, 100.0]], resamples=4000)
    assert pooled_low < 50.0


def test_same_data_same_interval_and_degenerate_cases():
    data = [[12.0, 40.0, 33.0, 51.0, 20.0]]
    assert interval(data, seed=3) == interval(data, seed=3)
    assert interval([[7.0, 7.0, 7.0]]) == (7.0, 7.0)
    low, high = interval([[5.0]])
    assert math.isnan(low) and math.isnan(high)


def test_t_interval_of_the_mean():
    # mean 2, s = 1, n = 3: 2 +- t(0.975, 2) / sqrt(3) = 2 +- 4.3026527 / 1.7320508
    low, high = t_interval([1.0, 2.0, 3.0])
    half = 4.3026527 / math.sqrt(3)
    assert (low, high) == pytest.approx((2 - half, 2 + half))
    import scipy.stats

    data = [3.5, 9.0, 4.25, 7.0, 1.0]
    sem = scipy.stats.sem(data)
    want = scipy.stats.t.interval(0.9, len(data) - 1, loc=sum(data) / 5, scale=sem)
    assert t_interval(data, confidence=0.9) == pytest.approx(want)
    assert t_interval([4.0, 4.0]) == (4.0, 4.0)
    low, high = t_interval([0.1, 0.1, 0.1])
    assert low == high == np.mean([0.1, 0.1, 0.1])  # the mean itself, not mean +- rounding
    assert all(math.isnan(v) for v in t_interval([4.0]))


def test_summarize_one_configuration():
    five = [500.0, 480.0, 20.0, 500.0, 490.0]
    s = summarize(five)
    assert s.n == 5
    assert s.mean == pytest.approx(398.0)
    assert (s.mean_low, s.mean_high) == pytest.approx(t_interval(five))
    assert s.iqm == pytest.approx((480 + 490 + 500) / 3)
    assert (s.min, s.max) == (20.0, 500.0)
    # below BOOTSTRAP_RUNS seeds the IQM gets no interval; from there, the bootstrap's
    assert math.isnan(s.low) and math.isnan(s.high)
    more = five + [470.0 + 7 * i for i in range(BOOTSTRAP_RUNS)]
    short = summarize(more[: BOOTSTRAP_RUNS - 1])
    assert math.isnan(short.low) and not math.isnan(short.mean_low)
    m = summarize(more[:BOOTSTRAP_RUNS], seed=4)
    assert (m.low, m.high) == interval([more[:BOOTSTRAP_RUNS]], seed=4)
    assert m.low <= m.iqm <= m.high and m.low < m.high
    empty = summarize([])
    assert empty.n == 0 and math.isnan(empty.iqm) and math.isnan(empty.mean_low)


def test_compare_two_groups_by_gap_and_probability_of_improvement():
    c = compare([11.0, 12.0, 13.0], [1.0, 2.0, 3.0])
    assert c.n == (3, 3)
    # Welch: both variances 1, se = sqrt(2/3), 4 degrees of freedom, t(0.975, 4) = 2.7764
    half = 2.7764451 * math.sqrt(2 / 3)
    assert c.mean_gap == pytest.approx((10.0, 10.0 - half, 10.0 + half))
    # 3 runs a side: no bootstrap intervals (they would be far too narrow), the points stay
    assert c.improvement[0] == 1.0 and math.isnan(c.improvement[1])
    assert c.iqm_gap[0] == pytest.approx(10.0) and math.isnan(c.iqm_gap[2])
    # exact Mann-Whitney, two-sided: 2 of the 20 ways to split 6 runs are this extreme
    assert c.p_value == pytest.approx(0.1)
    # ties count half: of the pairs (1,2) (1,3) (2,2) (2,3) only (2,2) scores, 0.5 / 4
    assert compare([1.0, 2.0], [2.0, 3.0]).improvement[0] == pytest.approx(0.125)
    # rliable's definition: the Mann-Whitney U of X over Y, divided by the pairs
    import scipy.stats

    x, y = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0], [6.0, 5.0, 3.0, 5.0]
    u = scipy.stats.mannwhitneyu(x, y, alternative="greater").statistic
    assert compare(x, y).improvement[0] == pytest.approx(u / (len(x) * len(y)))
    # the IQM drops one run from each end of six: the outliers move the mean, not the IQM
    skew = compare([0.0, 10.0, 10.0, 10.0, 10.0, 100.0], [10.0] * 6)
    assert skew.mean_gap[0] == pytest.approx(140.0 / 6 - 10.0)
    assert skew.iqm_gap[0] == pytest.approx(0.0)


def test_bootstrap_intervals_resample_each_group_alone_from_enough_runs():
    import numpy as np
    import scipy.stats

    rng = np.random.default_rng(5)
    x, y = rng.normal(1.0, 1.0, 12), rng.normal(0.0, 1.0, 10)  # overlapping groups
    c = compare(x, y, resamples=199, seed=4)

    def one_by_one(statistic):
        res = scipy.stats.bootstrap(
            (x, y),
            statistic,
            n_resamples=199,
            batch=4_000_000 // (x.size * y.size),
            vectorized=False,
            paired=False,
            confidence_level=0.95,
            method="percentile",
            rng=np.random.default_rng(4),
        )
        return res.confidence_interval.low, res.confidence_interval.high

    def iqm_gap(a, b):
        return scipy.stats.trim_mean(a, 0.25) - scipy.stats.trim_mean(b, 0.25)

    def improvement(a, b):
        return np.mean([(i > j) + 0.5 * (i == j) for i in a for j in b])

    assert c.iqm_gap[1:] == pytest.approx(one_by_one(iqm_gap))
    assert c.improvement[1:] == pytest.approx(one_by_one(improvement))
    assert c.improvement[1] < c.improvement[0] < c.improvement[2]
    assert compare(x, y, resamples=199, seed=4) == c  # same data, same seed
    # the bootstrap starts at BOOTSTRAP_RUNS a side (below it, its intervals run narrow)
    enough = compare(x[:BOOTSTRAP_RUNS], y[:BOOTSTRAP_RUNS], resamples=199)
    fewer = compare(x[: BOOTSTRAP_RUNS - 1], y[:BOOTSTRAP_RUNS], resamples=199)
    assert not math.isnan(enough.improvement[1]) and not math.isnan(enough.iqm_gap[1])
    assert math.isnan(fewer.improvement[1]) and math.isnan(fewer.iqm_gap[1])
    assert not math.isnan(fewer.mean_gap[1])  # Welch's needs two runs a side


def test_compare_ties_and_too_few_runs():
    same = compare([4.0, 9.0, 6.0], [4.0, 9.0, 6.0])
    assert same.mean_gap[0] == 0.0 and same.improvement[0] == 0.5 and same.p_value == 1.0
    assert same.mean_gap[1] < 0.0 < same.mean_gap[2]
    # nothing varies: every interval is the point
    still = compare([7.0, 7.0], [7.0, 7.0])
    assert still.mean_gap == still.iqm_gap == (0.0, 0.0, 0.0)
    assert still.improvement == (0.5, 0.5, 0.5)
    # one run a side: no interval, even when the two are equal
    for one in (compare([5.0], [1.0, 2.0]), compare([5.0], [5.0])):
        assert all(math.isnan(f[1]) for f in (one.mean_gap, one.iqm_gap, one.improvement))
        assert math.isnan(one.p_value)
    assert compare([5.0], [1.0, 2.0]).mean_gap[0] == pytest.approx(3.5)
    with pytest.raises(ValueError, match="one or more a side"):
        compare([], [1.0])


def test_curve_bands_follow_the_seed_count():
    from rlamd.sweep.curves import CURVE_RESAMPLES, aggregate

    steps = np.arange(0, 1000, 100, dtype=np.float64)

    def curves(n):  # seed k scores k * step / 100 + k^2, wall clock = step / 10
        return [np.stack([steps, steps / 10, k * steps / 100 + k * k], 1) for k in range(n)]

    x, rows, values = aggregate(curves(2), 0)  # no band: t(0.975, 1) is 12.7
    assert len(x) and np.allclose(rows[:, 0], values.mean(0))
    assert np.array_equal(rows[:, 1], rows[:, 0]) and np.array_equal(rows[:, 2], rows[:, 0])
    n = BOOTSTRAP_RUNS - 1
    x, rows, values = aggregate(curves(n), 0)  # the mean and Student's t
    assert np.allclose(rows[:, 0], values.mean(0))
    assert np.allclose(rows[:, 1:], [t_interval(values[:, j]) for j in range(len(x))])
    assert (rows[:, 2] > rows[:, 1]).all()
    x, rows, values = aggregate(curves(BOOTSTRAP_RUNS), 1)  # the IQM and its bootstrap
    j = len(x) // 2
    assert rows[j, 0] == pytest.approx(iqm(values[:, j]))
    assert tuple(rows[j, 1:]) == interval([values[:, j]], resamples=CURVE_RESAMPLES, seed=j)
    _, forced, values = aggregate(curves(BOOTSTRAP_RUNS), 1, use_iqm=False)
    assert np.allclose(forced[:, 0], values.mean(0))  # one statistic for a whole chart


def test_gap_lines_give_each_group_and_each_gap_worked_by_hand():
    lines = gap_lines(
        {"a": [1.0, 2.0, 3.0], "bb": [4.0, 5.0, 6.0]},
        [("a - bb", [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), ("one", [7.0], [4.0, 5.0])],
    )
    assert lines[:2] == ["  a        2 ±     1   [1, 2, 3]", "  bb       5 ±     1   [4, 5, 6]"]
    # Welch: standard error sqrt(1/3 + 1/3), 4 degrees of freedom, t = 2.776: -3 +- 2.27;
    # Mann-Whitney, every x below every y at 3 a side: two-sided exact p = 2 / 20
    assert lines[2] == "  a - bb      -3 [-5, -1]  p = 0.10"
    # one run a side has no interval and no p-value: said as nan, not made up
    assert lines[3] == "  one         +2 [+nan, +nan]  p = nan"
