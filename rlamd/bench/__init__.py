"""Benchmarks behind one command, ``python -m rlamd.bench [SUITE ...]``."""

from __future__ import annotations

from .common import Figure, measure
from .peer import register
from .peers import SHIPPED

for _peer in SHIPPED:
    register(_peer)

__all__ = ["Figure", "measure"]
