"""Aggregate scores over seeds: the interquartile mean and a stratified bootstrap interval.

The statistics follow Agarwal et al. 2021 ("Deep RL at the Edge of the Statistical
Precipice") as the ``rliable`` library computes them, with SciPy doing the work:

* the IQM is ``scipy.stats.trim_mean(scores, 0.25)``: the mean of the middle half of the
  runs (a quarter cut from each end, rounded down: 5 seeds keep the middle 3);
* the interval is a percentile bootstrap (``scipy.stats.bootstrap``, ``method="percentile"``)
  of that IQM, *stratified*: each stratum (a task; one env in a sweep, so one stratum) is
  resampled within itself, never pooled with another's runs;
* two groups of runs (two frameworks, two configurations) compare by the difference of
  their means or IQMs with a bootstrap interval, each group resampled on its own, and by
  the probability of improvement, ``P(X > Y) + P(X = Y) / 2`` over every pair of runs
  (the Mann-Whitney statistic over ``n * m``, as ``rliable`` defines it for one task).

SciPy is imported on first use (it comes with ``bash scripts/setup.sh --ray``, and with
``--dev`` for the tests).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Comparison", "Interval", "compare", "interval", "iqm", "summarize"]

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


def _improvement(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """``P(X > Y) + P(X = Y) / 2`` over all pairs (resample batches along ``axis``)."""
    x, y = np.moveaxis(x, axis, -1)[..., :, None], np.moveaxis(y, axis, -1)[..., None, :]
    return ((x > y) + 0.5 * (x == y)).mean(axis=(-2, -1))


def _iqm_gap(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    stats = _scipy_stats()
    return stats.trim_mean(x, 0.25, axis=axis) - stats.trim_mean(y, 0.25, axis=axis)


def _mean_gap(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


@dataclass(frozen=True)
class Comparison:
    """Group X against group Y: each figure is ``(point, low, high)``, the interval a
    percentile bootstrap (the point where no run differs; (nan, nan) where a group has
    fewer than two runs)."""

    n: tuple[int, int]
    mean_gap: tuple[float, float, float]
    """mean(X) - mean(Y)"""
    iqm_gap: tuple[float, float, float]
    """IQM(X) - IQM(Y)"""
    improvement: tuple[float, float, float]
    """P(X > Y) + P(X = Y) / 2 for a run of each, drawn at random: 0.5 is a tie"""


def compare(
    ours: Sequence[float],
    theirs: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """Runs of X (``ours``) against runs of Y (``theirs``), unpaired (their seeds share no
    random stream); the same data and ``seed`` give the same intervals."""
    x, y = (np.asarray(a, dtype=np.float64) for a in (ours, theirs))
    if not x.size or not y.size:
        raise ValueError(f"compare: {x.size} and {y.size} runs; accepted: one or more a side")
    figures = []
    for fn in (_mean_gap, _iqm_gap, _improvement):
        point = float(fn(x, y))
        low = high = point if np.ptp(np.concatenate([x, y])) == 0 else math.nan
        if min(x.size, y.size) >= 2 and math.isnan(low):
            res = _scipy_stats().bootstrap(
                (x, y),
                fn,
                n_resamples=resamples,
                batch=max(1, 4_000_000 // (x.size * y.size)),  # P's pairs: bounded memory
                vectorized=True,
                paired=False,
                axis=-1,
                confidence_level=confidence,
                method="percentile",
                rng=np.random.default_rng(seed),
            )
            low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        figures.append((point, low, high))
    return Comparison((int(x.size), int(y.size)), *figures)
