"""Learning curves of a sweep: score against env steps and against wall clock, one line per
configuration (the IQM over its seeds) with its 95% bootstrap interval as a band.

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

from .stats import interval, iqm
from .trial import read_progress

__all__ = ["aggregate", "plot_curves"]

POINTS = 40
CURVE_RESAMPLES = 1000


def aggregate(curves: list[np.ndarray], column: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The IQM over seeds at common x values, with the interval's low and high.

    Args:
        curves: per seed, rows of ``(step, wall_s, score)``.
        column: 0 for env steps on the x axis, 1 for wall clock.

    Returns:
        (x, rows of (iqm, low, high)), x empty where a seed has fewer than two points;
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
    rows = []
    for j in range(len(x)):
        low, high = interval([values[:, j]], resamples=CURVE_RESAMPLES, seed=j)
        middle = float(iqm(values[:, j]))
        rows.append((middle, middle if low != low else low, middle if high != high else high))
    return x, np.asarray(rows), values


def plot_curves(groups: list[Any], path: Path, title: str = "") -> str:
    """Write the two-panel chart; returns the line saying where (or why it was skipped)."""
    got = new_chart(1, 2, (11, 4))
    if got is None:
        return "curves.png skipped: matplotlib is not installed (pip install matplotlib)"
    fig, axes = got[0], got[1][0]
    drawn = 0
    for g in groups:
        curves = [read_progress(Path(t["run_dir"])) for t in g.trials]
        what = " ".join(f"{k}={v}" for k, v in g.settings.items())
        label = f"{g.id} {what[:40]} (n={sum(len(c) >= 2 for c in curves)})"
        for ax, column in zip(axes, (0, 1), strict=True):
            x, rows, _ = aggregate(curves, column)
            if not len(x):
                continue
            (line,) = ax.plot(x, rows[:, 0], label=label)
            ax.fill_between(x, rows[:, 1], rows[:, 2], color=line.get_color(), alpha=0.2)
            drawn += 1
    axes[0].set_xlabel("env steps")
    axes[1].set_xlabel("wall clock of training (s)")
    for ax in axes:
        ax.set_ylabel("score (IQM over seeds, 95% CI)")
        ax.grid(alpha=0.3)
    if drawn:
        axes[0].legend(fontsize=8)
    fig.suptitle(title or "sweep")
    written = save_chart(fig, path)
    return f"curves: {written}" + ("" if drawn else " (no trial has reported twice yet)")
