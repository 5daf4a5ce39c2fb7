"""Learning curves of a sweep: score against env steps and against wall clock, one line per
configuration with its 95% interval as a band: the IQM over its seeds and its bootstrap
interval where every line has :data:`~rlamd.sweep.stats.BOOTSTRAP_RUNS` seeds, else the mean
and its Student t interval (a percentile bootstrap runs too narrow with fewer); no band
below 3 seeds. A line counts every trial that reported twice, unfinished ones too, so the
chart can be drawn while the sweep runs.

Each trial's curve is its reported training score (``progress.csv``: the mean of its last
100 episodes), read at common points by linear interpolation, up to where its shortest
seed ends, so every point has every seed. matplotlib is imported on first use (``--dev``,
``--bench``); without it the chart is skipped with one line saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlamd.charts import new_chart, save_chart

from .stats import BOOTSTRAP_RUNS, interval, iqm, t_interval
from .trial import read_progress

__all__ = ["aggregate", "plot_curves"]

POINTS = 40
CURVE_RESAMPLES = 1000


def aggregate(
    curves: list[np.ndarray], column: int, use_iqm: bool | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The IQM or the mean over seeds at common x values, with its 95% interval.

    Args:
        curves: per seed, rows of ``(step, wall_s, score)``.
        column: 0 for env steps on the x axis, 1 for wall clock.
        use_iqm: the IQM with its bootstrap interval, or the mean with Student's t
            interval; by default the IQM from :data:`~rlamd.sweep.stats.BOOTSTRAP_RUNS`
            seeds. Below 3 seeds there is no band (low = high = the line).

    Returns:
        (x, rows of (middle, low, high)), x empty where a seed has fewer than two points;
        and the seeds' values at x (seeds x points).
    """
    usable = [c for c in curves if len(c) >= 2]
    if not usable:
        return np.zeros(0), np.zeros((0, 3)), np.zeros((0, 0))
    start = max(c[0, column] for c in usable)
    end = min(c[-1, column] for c in usable)
    if end <= start:
        return np.zeros(0), np.zeros((0, 3)), np.zeros((0, 0))
    x = np.linspace(start, end, POINTS)
    values = np.stack([np.interp(x, c[:, column], c[:, 2]) for c in usable])
    if use_iqm is None:
        use_iqm = len(usable) >= BOOTSTRAP_RUNS
    rows = []
    for j in range(len(x)):
        at = values[:, j]
        middle = float(iqm(at) if use_iqm else at.mean())
        if len(usable) < 3:  # t(0.975, 1) = 12.7: a band that would flatten every other line
            low = high = middle
        elif use_iqm:
            low, high = interval([at], resamples=CURVE_RESAMPLES, seed=j)
        else:
            low, high = t_interval(at)
        rows.append((middle, middle if low != low else low, middle if high != high else high))
    return x, np.asarray(rows), values


def plot_curves(groups: list[Any], path: Path, title: str = "") -> str:
    """Write the two-panel chart; returns the line saying where (or why it was skipped)."""
    got = new_chart(1, 2, (11, 4))
    if got is None:
        return "curves.png skipped: matplotlib is not installed (pip install matplotlib)"
    fig, axes = got[0], got[1][0]
    drawn = 0
    per_group = [[read_progress(Path(t["run_dir"])) for t in g.trials] for g in groups]
    counts = [sum(len(c) >= 2 for c in curves) for curves in per_group]
    # one statistic for the whole chart: the IQM only when every line has enough seeds
    use_iqm = bool(counts) and min(counts) >= BOOTSTRAP_RUNS
    middle = "IQM" if use_iqm else "mean"
    for g, curves, seeds in zip(groups, per_group, counts, strict=True):
        what = " ".join(f"{k}={v}" for k, v in g.settings.items())
        label = f"{g.id} {what[:40]} (n={seeds})"
        for ax, column in zip(axes, (0, 1), strict=True):
            x, rows, _ = aggregate(curves, column, use_iqm)
            if not len(x):
                continue
            (line,) = ax.plot(x, rows[:, 0], label=label)
            ax.fill_between(x, rows[:, 1], rows[:, 2], color=line.get_color(), alpha=0.2)
            drawn += 1
    axes[0].set_xlabel("env steps")
    axes[1].set_xlabel("wall clock of training (s)")
    for ax in axes:
        ax.set_ylabel(f"score, {middle} over seeds (95% CI)")
        ax.grid(alpha=0.3)
    if drawn:
        axes[0].legend(fontsize=8)
    fig.suptitle(title or "sweep")
    written = save_chart(fig, path)
    return f"curves: {written}" + ("" if drawn else " (no trial has reported twice yet)")
