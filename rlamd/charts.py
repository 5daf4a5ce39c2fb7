"""Headless matplotlib charts, where matplotlib is installed (``--dev``, ``--bench``): the
sweep's curves and the bench's bars and races draw through these two calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["new_chart", "save_chart"]


def new_chart(rows: int, cols: int, size: tuple[float, float]) -> tuple[Any, Any] | None:
    """A figure off screen (the Agg backend) and its 2-D array of axes; None without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt.subplots(rows, cols, figsize=size, squeeze=False, constrained_layout=True)


def save_chart(fig: Any, path: str | Path) -> str:
    """Write ``fig`` to ``path`` (its folder made), close it, and return the path."""
    import matplotlib.pyplot as plt

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
