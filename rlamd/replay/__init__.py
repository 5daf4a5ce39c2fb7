"""Device-resident replay: storage + sampler, composed (STYLE.md)."""

from __future__ import annotations

from .buffer import PrioritizedReplayBuffer, ReplayBatch, ReplayBuffer
from .samplers import PrioritizedSampler, UniformSampler
from .segment_tree import SegmentTree
from .storage import TransitionStorage

__all__ = [
    "PrioritizedReplayBuffer",
    "PrioritizedSampler",
    "ReplayBatch",
    "ReplayBuffer",
    "SegmentTree",
    "TransitionStorage",
    "UniformSampler",
]
