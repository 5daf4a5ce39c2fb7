"""TorchRL as a peer for prioritized replay: its ``PrioritizedSampler`` (C++ trees).

torchrl 0.14.1's prebuilt extension fails to load with torch 2.13 (undefined symbol), so the
sources its wheel ships (``csrc/``) are built once into ``~/.cache/rlamd`` (``RLAMD_CACHE``).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from rlamd.bench.common import repeat
from rlamd.bench.peer import BasePeer, PeerUnavailable, require

__all__ = ["PEER"]


def _build_extension(torchrl_dir: Path) -> Any:
    from torch.utils.cpp_extension import load

    csrc = torchrl_dir / "csrc"
    sources = [csrc / "pybind.cpp", csrc / "utils.cpp"]
    if not all(s.exists() for s in sources):
        raise PeerUnavailable(f"torchrl's extension does not load and {csrc} has no sources")
    cache = Path(os.environ.get("RLAMD_CACHE", Path.home() / ".cache" / "rlamd")) / "torchrl_ext"
    cache.mkdir(parents=True, exist_ok=True)
    try:
        sources, inc = [str(s) for s in sources], [str(csrc)]
        return load("_torchrl", sources, extra_include_paths=inc, build_directory=str(cache))
    except Exception as exc:
        raise PeerUnavailable(f"building torchrl's segment tree from {csrc} failed: {exc}") from exc


class TorchRL(BasePeer):
    name, label, colour = "torchrl", "TorchRL", "#8e44ad"
    measurements = frozenset({"replay"})
    requires = ("torchrl", "`pip install torchrl` to compare against it")

    def replay(self, capacity: int, batch: int, iters: int, alpha: float, beta: float):
        """Its ``PrioritizedSampler`` (C++ sum/min trees): ``run()`` draws ``batch`` and writes
        their priorities, ``iters`` times."""
        import torch
        from torchrl.data import LazyTensorStorage

        torchrl = require(*self.requires)
        prio = importlib.import_module("torchrl.data.replay_buffers.samplers.prioritized")
        if prio.SumSegmentTreeFp32 is None:
            ext = _build_extension(Path(torchrl.__file__).parent)
            for name in (f"{k}SegmentTreeFp{bits}" for k in ("Sum", "Min") for bits in (32, 64)):
                setattr(prio, name, getattr(ext, name))
        sampler = prio.PrioritizedSampler(capacity, alpha=alpha, beta=beta)
        storage = LazyTensorStorage(capacity)
        storage.set(torch.arange(capacity), torch.zeros(capacity, 1))
        sampler.update_priority(torch.arange(capacity), torch.rand(capacity) * 5 + 1e-3)

        def step() -> None:
            idx, _info = sampler.sample(storage, batch)
            sampler.update_priority(idx, torch.rand(batch))

        return repeat(step, iters)


PEER = TorchRL()
