"""The sweep's statistics against values worked out by hand (rlamd/sweep/stats.py)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("scipy")

from rlamd.sweep.stats import interval, iqm, summarize


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
