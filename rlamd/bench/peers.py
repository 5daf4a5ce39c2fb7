"""Installed peer libraries, loaded for side-by-side figures, or a reason they can't be.

A peer that is missing or cannot load is reported with the reason and never given a
figure (no numbers are invented or copied in its place).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

__all__ = ["PeerUnavailable", "rllib_ppo", "sb3", "torchrl_prioritized_sampler"]


class PeerUnavailable(RuntimeError):
    """A peer library is not installed, or its compiled parts do not load here."""


def _require(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError, or a broken install raising anything
        raise PeerUnavailable(
            f"{module} not importable ({exc.__class__.__name__}: {exc}); {extra}"
        ) from exc


def sb3() -> Any:
    """Stable-Baselines3, from the ``bench`` extra."""
    return _require("stable_baselines3", "install it with `bash scripts/setup.sh --bench`")


def rllib_ppo() -> Any:
    """RLlib's PPO, from the ``ray`` extra."""
    _require("ray.rllib.algorithms.ppo", "install it with `bash scripts/setup.sh --ray`")
    return _require("ray.rllib.algorithms.ppo", "")


def _build_torchrl_extension(torchrl_dir: Path) -> Any:
    """Compile the C++ segment trees that torchrl's wheel ships as sources (csrc/).

    torchrl 0.14.1's prebuilt extension is linked against another torch and fails to
    load with torch 2.13 (undefined symbol); its own sources build against ours.
    """
    from torch.utils.cpp_extension import load

    csrc = torchrl_dir / "csrc"
    sources = [csrc / "pybind.cpp", csrc / "utils.cpp"]
    if not all(s.exists() for s in sources):
        raise PeerUnavailable(
            f"torchrl's extension does not load and {csrc} has no sources to build"
        )
    cache = Path(os.environ.get("RLAMD_CACHE", Path.home() / ".cache" / "rlamd")) / "torchrl_ext"
    cache.mkdir(parents=True, exist_ok=True)
    try:
        return load(
            name="_torchrl",
            sources=[str(s) for s in sources],
            extra_include_paths=[str(csrc)],
            build_directory=str(cache),
            verbose=False,
        )
    except Exception as exc:
        raise PeerUnavailable(f"building torchrl's segment tree from {csrc} failed: {exc}") from exc


def torchrl_prioritized_sampler(capacity: int, alpha: float, beta: float) -> Any:
    """TorchRL's ``PrioritizedSampler`` with its C++ sum/min trees."""
    torchrl = _require("torchrl", "`pip install torchrl` to compare against it")
    prio = importlib.import_module("torchrl.data.replay_buffers.samplers.prioritized")
    if prio.SumSegmentTreeFp32 is None:
        ext = _build_torchrl_extension(Path(torchrl.__file__).parent)
        for name in (
            "SumSegmentTreeFp32",
            "MinSegmentTreeFp32",
            "SumSegmentTreeFp64",
            "MinSegmentTreeFp64",
        ):
            setattr(prio, name, getattr(ext, name))
    return prio.PrioritizedSampler(capacity, alpha=alpha, beta=beta)
