"""Aggregate scores over seeds: the mean with Student's t interval, the interquartile mean
with a stratified bootstrap interval (from :data:`BOOTSTRAP_RUNS` seeds), and two groups
compared.

The statistics follow Agarwal et al. 2021 ("Deep RL at the Edge of the Statistical
Precipice") as the ``rliable`` library computes them, with SciPy doing the work:

* the IQM is ``scipy.stats.trim_mean(scores, 0.25)``: the mean of the middle half of the
  runs (a quarter cut from each end, rounded down: 5 seeds keep the middle 3);
* the IQM's interval is a percentile bootstrap (``scipy.stats.bootstrap``,
  ``method="percentile"``), *stratified*: each stratum (a task; one env in a sweep, so one
  stratum) is resampled within itself, never pooled with another's runs. A sweep's table
  gives it from :data:`BOOTSTRAP_RUNS` seeds, and the mean's Student t interval from 2;
* two groups of runs (two frameworks, two configurations) compare by the difference of
  their means, with Welch's t interval, and of their IQMs, and by the probability of
  improvement, ``P(X > Y) + P(X = Y) / 2`` over every pair of runs (the Mann-Whitney
  statistic over ``n * m``, as ``rliable`` defines it for one task) with the Mann-Whitney
  test's p-value; the last two get a bootstrap interval, each group resampled on its own,
  from :data:`BOOTSTRAP_RUNS` runs a side.

SciPy is imported on first use (it comes with ``bash scripts/setup.sh --ray``, ``--bench``
and ``--dev``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "BOOTSTRAP_RUNS",
    "Comparison",
    "Interval",
    "compare",
    "gap_lines",
    "interval",
    "iqm",
    "summarize",
    "t_interval",
]

CONFIDENCE = 0.95
RESAMPLES = 5000

BOOTSTRAP_RUNS = 7
"""Runs (a side) from which the IQM (:func:`summarize`), the IQM gap and the probability
of improvement (:func:`compare`) get a bootstrap interval. With fewer, the percentile
bootstrap's 95% intervals are too narrow: drawing both groups from one normal
distribution 400 times, the interval of the difference of means missed 0 in 22% of the
draws at 3 runs a side, 11% at 5, 6% at 7 and 10, and that of the probability of
improvement missed 0.5 in 19%, 10%, 4% and 4% (Welch's t interval: 3%, 4%, 2%, 3%;
``results/bootstrap_coverage/``); at 2 a side, when every run of one group beats every
run of the other, every resample agrees. For one group the IQM's interval still runs a
little narrow at 7: it missed its true value in 24% of the draws at 3 runs, 8% at 5, 9%
at 7 and 6% at 10 (Student's t interval of the mean: 5%, 5%, 7%, 5%)."""


def _scipy_stats():
    try:
        import scipy.stats
    except ImportError:
        raise ImportError(
            "these statistics need SciPy, which this Python does not have; install it with "
            "`bash scripts/setup.sh --ray` (or --bench, or `pip install 'scipy>=1.15'`)"
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


def _bootstrap(
    data: tuple[np.ndarray, ...],
    statistic,
    confidence: float,
    resamples: int,
    seed: int,
    batch: int | None = None,
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``statistic`` (vectorized along the last
    axis), each array of ``data`` resampled on its own."""
    res = _scipy_stats().bootstrap(
        data,
        statistic,
        n_resamples=resamples,
        batch=batch,
        vectorized=True,
        paired=False,
        axis=-1,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


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
    return _bootstrap(tuple(data), _stratified_iqm, confidence, resamples, seed)


def t_interval(
    scores: Sequence[float] | np.ndarray, *, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Student's t interval of the mean of ``scores``: ``mean +- t(n - 1) * s / sqrt(n)``
    (``scipy.stats.t.interval(confidence, n - 1, mean, sem)``).

    Returns:
        (low, high); (nan, nan) below 2 runs; the mean itself where no run differs.
    """
    a = np.asarray(scores, dtype=np.float64)
    if a.size < 2:
        return math.nan, math.nan
    mean, sd = float(a.mean()), float(a.std(ddof=1))
    if np.ptp(a) == 0:
        return mean, mean
    half = float(_scipy_stats().t.ppf((1 + confidence) / 2, a.size - 1)) * sd / math.sqrt(a.size)
    return mean - half, mean + half


@dataclass(frozen=True)
class Interval:
    """What the sweep's table says of one configuration's scores over seeds: each interval
    is 95%, (nan, nan) where it cannot be had (see :func:`summarize`)."""

    n: int
    mean: float
    mean_low: float
    mean_high: float
    iqm: float
    low: float
    """the IQM's stratified bootstrap interval (from :data:`BOOTSTRAP_RUNS` runs)"""
    high: float
    min: float
    max: float


def summarize(scores: Sequence[float], *, seed: int = 0) -> Interval:
    """Mean with Student's t interval (from 2 runs), IQM with its stratified bootstrap
    interval (from :data:`BOOTSTRAP_RUNS` runs: below, a percentile bootstrap runs too
    narrow), min and max of one group."""
    a = np.asarray(scores, dtype=np.float64)
    nan = math.nan
    if a.size == 0:
        return Interval(0, nan, nan, nan, nan, nan, nan, nan, nan)
    low, high = interval([a], seed=seed) if a.size >= BOOTSTRAP_RUNS else (nan, nan)
    return Interval(
        int(a.size),
        float(a.mean()),
        *t_interval(a),
        float(iqm(a)),
        low,
        high,
        float(a.min()),
        float(a.max()),
    )


def _improvement(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """``P(X > Y) + P(X = Y) / 2`` over all pairs (resample batches along ``axis``)."""
    x, y = np.moveaxis(x, axis, -1)[..., :, None], np.moveaxis(y, axis, -1)[..., None, :]
    return ((x > y) + 0.5 * (x == y)).mean(axis=(-2, -1))


def _iqm_gap(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    stats = _scipy_stats()
    return stats.trim_mean(x, 0.25, axis=axis) - stats.trim_mean(y, 0.25, axis=axis)


@dataclass(frozen=True)
class Comparison:
    """Group X against group Y: each figure is ``(point, low, high)`` at the confidence
    asked for; an interval is (nan, nan) where it cannot be had (see :func:`compare`)."""

    n: tuple[int, int]
    mean_gap: tuple[float, float, float]
    """mean(X) - mean(Y), with Welch's t interval (from 2 runs a side)"""
    iqm_gap: tuple[float, float, float]
    """IQM(X) - IQM(Y), with a percentile bootstrap interval (from :data:`BOOTSTRAP_RUNS`
    a side); the IQM is the mean below 4 runs (a quarter of 3 rounds down to none)"""
    improvement: tuple[float, float, float]
    """P(X > Y) + P(X = Y) / 2 for a run of each, drawn at random (0.5 is a tie), with a
    percentile bootstrap interval (from :data:`BOOTSTRAP_RUNS` a side)"""
    p_value: float
    """The two-sided Mann-Whitney test's p-value that X and Y are alike (from 2 runs a
    side): small where P is far from 0.5 for more than chance"""


def _welch(x: np.ndarray, y: np.ndarray, gap: float, confidence: float) -> tuple[float, float]:
    """Welch's t interval of ``mean(x) - mean(y)`` (unequal variances, Welch-Satterthwaite
    degrees of freedom): ``scipy.stats.ttest_ind(x, y, equal_var=False)``'s interval,
    without its precision-loss warning when one group has no spread."""
    vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    df = (vx + vy) ** 2 / (vx**2 / (x.size - 1) + vy**2 / (y.size - 1))
    half = float(_scipy_stats().t.ppf((1 + confidence) / 2, df) * math.sqrt(vx + vy))
    return gap - half, gap + half


def compare(
    ours: Sequence[float],
    theirs: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """Runs of X (``ours``) against runs of Y (``theirs``), unpaired (their seeds share no
    random stream); the same data and ``seed`` give the same intervals. Intervals are
    (nan, nan) below 2 runs a side (and the bootstrap's below :data:`BOOTSTRAP_RUNS`),
    and the point itself where no run differs from another."""
    x, y = (np.asarray(a, dtype=np.float64) for a in (ours, theirs))
    if not x.size or not y.size:
        raise ValueError(f"compare: {x.size} and {y.size} runs; accepted: one or more a side")
    stats, runs = _scipy_stats(), min(x.size, y.size)
    still = np.ptp(np.concatenate([x, y])) == 0
    nan = (math.nan, math.nan)
    figures = []
    batch = max(1, 4_000_000 // (x.size * y.size))  # P's pairs: bounded memory
    for fn in (_iqm_gap, _improvement):
        point = float(fn(x, y))
        if runs < 2 or (runs < BOOTSTRAP_RUNS and not still):
            figures.append((point, *nan))
        elif still:
            figures.append((point, point, point))
        else:
            figures.append((point, *_bootstrap((x, y), fn, confidence, resamples, seed, batch)))
    gap = float(x.mean() - y.mean())
    welch, p_value = nan, math.nan
    if runs >= 2:
        p_value = 1.0 if still else float(stats.mannwhitneyu(x, y).pvalue)  # two-sided
        spread = x.var() > 0 or y.var() > 0
        welch = _welch(x, y, gap, confidence) if spread else (gap, gap)
    return Comparison((int(x.size), int(y.size)), (gap, *welch), *figures, p_value)


def gap_lines(
    groups: dict[str, Sequence[float]],
    gaps: Sequence[tuple[str, Sequence[float], Sequence[float]]],
) -> list[str]:
    """An experiment's comparison as text: one line per group (mean ± standard deviation,
    then each run), then one per ``(label, X, Y)`` of ``gaps`` (mean(X) - mean(Y) with
    Welch's interval, and the Mann-Whitney p-value of :func:`compare`), indented by two."""
    wide = max(map(len, groups))
    out = []
    for name, xs in groups.items():
        runs = ", ".join(f"{x:,.0f}" for x in xs)
        spread = np.std(xs, ddof=1) if len(xs) > 1 else math.nan
        out.append(f"  {name:<{wide}} {np.mean(xs):7,.0f} ± {spread:5,.0f}   [{runs}]")
    wide = max((len(label) for label, _, _ in gaps), default=0)
    for label, ours, theirs in gaps:
        c = compare(ours, theirs)
        gap, low, high = c.mean_gap
        out.append(
            f"  {label:<{wide}} {gap:+7,.0f} [{low:+,.0f}, {high:+,.0f}]  p = {c.p_value:.2f}"
        )
    return out
