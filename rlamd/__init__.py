"""rlamd: reinforcement learning for AMD GPUs (ROCm), NVIDIA GPUs and the CPU."""

from __future__ import annotations

import os as _os

from . import threads as _threads

_threads.prepare_env()  # before torch loads: OpenMP reads its wait policy once

from .device import DeviceError, DeviceInfo, describe_device, resolve_device  # noqa: E402

# In a source tree (a clone, or the copy `ray job submit --working-dir` ships to every
# node) agents/ and envs/ sit beside rlamd/; the installed package maps them to
# rlamd.agents and rlamd.envs (pyproject's package-dir), and this does the same here.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_root, "pyproject.toml")) and _os.path.isfile(
    _os.path.join(_root, "agents", "__init__.py")
):
    __path__.append(_root)


__version__ = "0.1.0"

__all__ = [
    "DeviceError",
    "DeviceInfo",
    "__version__",
    "describe_device",
    "fit",
    "load",
    "resolve_device",
    "sweep",
]

_API = ("fit", "load")


def __getattr__(name: str):
    """``rlamd.fit`` and ``rlamd.load`` (:mod:`rlamd.api`, the top layer) and ``rlamd.sweep``
    (the callable package :mod:`rlamd.sweep`), imported on first use by name, so ``import
    rlamd`` loads none of the layers above this one (docs/ARCHITECTURE.md, Layers)."""
    import importlib

    if name in _API:
        return getattr(importlib.import_module("rlamd.api"), name)
    if name == "sweep":
        return importlib.import_module("rlamd.sweep")
    raise AttributeError(f"module 'rlamd' has no attribute {name!r}")
