"""Benchmarks behind one command, ``python -m rlamd.bench [SUITE ...]``."""

from __future__ import annotations

from .common import Figure, measure

__all__ = ["Figure", "measure"]
