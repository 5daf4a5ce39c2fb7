"""Each peer's race recipes by the peer's name in capitals (``from rlamd.bench.zoo import
NAME``: ``rlamd.bench.peers.NAME.RECIPES``), and the lookup shared by all of them."""

from __future__ import annotations

from typing import Any

from .peer import Recipe, get, recipe

__all__ = ["Recipe", "recipe"]


def __getattr__(name: str) -> Any:
    import importlib

    try:
        module = importlib.import_module(type(get(name.lower())).__module__)
    except ValueError as exc:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from exc
    return module.RECIPES
