"""Agents for rlamd, installed as ``rlamd.agents``."""

from __future__ import annotations

__all__: list[str] = []
