"""Aggregate scores over seeds: the interquartile mean and a stratified bootstrap interval.

The statistics follow Agarwal et al. 2021 ("Deep RL at the Edge of the Statistical
Precipice") as the ``rliable`` library computes them, with SciPy doing the work:

* the IQM is ``scipy.stats.trim_mean(scores, 0.25)``: the mean of the middle half of the
  runs (a quarter cut from each end, rounded down: 5 seeds keep the middle 3);
* the interval is a percentile bootstrap (``scipy.stats.bootstrap``, ``method="percentile"``)
  of that IQM, *stratified*: each stratum (a task; one env in a sweep, so one stratum) is
  resampled within itself, never pooled with another's runs.

SciPy is imported on first use (it comes with ``bash scripts/setup.sh --ray``, and with
``--dev`` for the tests).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Interval", "interval", "iqm", "summarize"]

CONFIDENCE = 0.95
RESAMPLES = 5000


def _scipy_stats():
    try:
        import scipy.stats
    except ImportError:
        raise ImportError(
            "the sweep's statistics need SciPy, which this Python does not have; install it "
            "with `bash scripts/setup.sh --ray` (or `pip install scipy`)"
        ) from None
    return scipy.stats


def iqm(scores: Sequence[float] | np.ndarray, axis: int | None = None) -> float | np.ndarray:
    """The interquartile mean: the mean after cutting 25% of the runs from each end."""
    a = np.asarray(scores, dtype=np.float64)
    if a.size == 0:
        return math.nan
    return _scipy_stats().trim_mean(a, 0.25, axis=axis)


def _stratified_iqm(*strata: np.ndarray, axis: int = -1) -> np.ndarray:
    """The IQM of all strata's runs together (each a batch of resamples along ``axis``)."""
    return _scipy_stats().trim_mean(np.concatenate(strata, axis=axis), 0.25, axis=axis)


def interval(
    strata: Sequence[Sequence[float]],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """The percentile bootstrap interval of the IQM, each stratum resampled on its own.

    Args:
        strata: the runs' scores per stratum (per task); a sweep passes one stratum.
        confidence: the interval's coverage.
        resamples: bootstrap resamples.
        seed: the bootstrap's random stream (the same data give the same interval).

    Returns:
        (low, high); (nan, nan) where no stratum has two runs to resample.
    """
    data = [np.asarray(s, dtype=np.float64) for s in strata if len(s)]
    if not data or max(len(s) for s in data) < 2:
        return math.nan, math.nan
    if all(np.all(s == s[0]) for s in data):  # nothing varies: every resample is the same
        value = float(iqm(np.concatenate(data)))
        return value, value
    res = _scipy_stats().bootstrap(
        tuple(data),
        _stratified_iqm,
        n_resamples=resamples,
        vectorized=True,
        paired=False,
        axis=-1,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


@dataclass(frozen=True)
class Interval:
    """What the sweep's table says of one configuration's scores over seeds."""

    n: int
    mean: float
    iqm: float
    low: float
    high: float
    min: float
    max: float


def summarize(scores: Sequence[float], *, seed: int = 0) -> Interval:
    """Mean, IQM with its 95% stratified bootstrap interval, min and max of one group."""
    a = np.asarray(scores, dtype=np.float64)
    if a.size == 0:
        nan = math.nan
        return Interval(0, nan, nan, nan, nan, nan, nan)
    low, high = interval([a], seed=seed)
    return Interval(
        int(a.size), float(a.mean()), float(iqm(a)), low, high, float(a.min()), float(a.max())
    )
