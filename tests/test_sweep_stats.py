"""The sweep's statistics against values worked out by hand (rlamd/sweep/stats.py)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("scipy")

from rlamd.sweep.stats import compare, interval, iqm, summarize


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


def test_summarize_one_configuration():
    s = summarize([500.0, 480.0, 20.0, 500.0, 490.0])
    assert s.n == 5
    assert s.mean == pytest.approx(398.0)
    assert s.iqm == pytest.approx((480 + 490 + 500) / 3)
    assert (s.min, s.max) == (20.0, 500.0)
    assert s.low <= s.iqm <= s.high
    empty = summarize([])
    assert empty.n == 0 and math.isnan(empty.iqm)


def test_compare_two_groups_by_gap_and_probability_of_improvement():
    c = compare([11.0, 12.0, 13.0], [1.0, 2.0, 3.0], resamples=2000)
    assert c.n == (3, 3)
    assert c.mean_gap[0] == pytest.approx(10.0)
    # every resample of X lies in [11, 13] and of Y in [1, 3]: gaps 8..12, X always ahead
    assert 8.0 <= c.mean_gap[1] < 10.0 < c.mean_gap[2] <= 12.0
    assert c.improvement == (1.0, 1.0, 1.0)
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


def test_compare_ties_seeds_and_too_few_runs():
    same = compare([4.0, 9.0, 6.0], [4.0, 9.0, 6.0], seed=1)
    assert same.mean_gap[0] == 0.0 and same.improvement[0] == 0.5
    assert same.mean_gap[1] < 0.0 < same.mean_gap[2]
    assert compare([4.0, 9.0, 6.0], [1.0, 5.0], seed=1) == compare(
        [4.0, 9.0, 6.0], [1.0, 5.0], seed=1
    )
    assert compare([7.0, 7.0], [7.0]).mean_gap == (0.0, 0.0, 0.0)  # nothing varies
    one = compare([5.0], [1.0, 2.0])
    assert one.mean_gap[0] == pytest.approx(3.5) and math.isnan(one.mean_gap[1])
    with pytest.raises(ValueError, match="one or more a side"):
        compare([], [1.0])
