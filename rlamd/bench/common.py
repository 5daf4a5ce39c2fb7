"""Timing helpers shared by every benchmark: warm-up excluded, medians of repeats."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

__all__ = ["Figure", "measure", "print_table", "sync"]


def sync(device: torch.device | str | None) -> None:
    """Wait for queued GPU work so a timer measures it (a no-op on the CPU)."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Figure:
    """One measured quantity: the median of repeats, with min, max and the raw values."""

    name: str
    unit: str
    median: float
    min: float
    max: float
    repeats: list[float] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(
    name: str,
    unit: str,
    fn: Callable[[], int | float],
    *,
    repeats: int = 5,
    warmup: int = 1,
    device: torch.device | str | None = None,
    per: str = "rate",
    **meta: Any,
) -> Figure:
    """Time ``fn`` ``repeats`` times after ``warmup`` untimed calls.

    ``fn`` returns how many units of work it did (steps, updates). With ``per="rate"``
    the figure is work per second; with ``per="us"`` microseconds per unit of work.
    """
    for _ in range(warmup):
        fn()
    sync(device)
    values = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        work = fn()
        sync(device)
        dt = time.perf_counter() - t0
        values.append(work / dt if per == "rate" else dt / work * 1e6)
    return Figure(name, unit, statistics.median(values), min(values), max(values), values, meta)


def print_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    """A plain fixed-width table on stdout."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))
