"""Benchmarks behind one command, ``python -m rlamd.bench [SUITE ...]``."""

from __future__ import annotations

from .common import Figure, measure
from .peers import SHIPPED  # importing it registers the shipped peers

__all__ = ["SHIPPED", "Figure", "measure"]
