"""Device-resident replay: storage + sampler, composed (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from .buffer import PrioritizedReplayBuffer, ReplayBatch, ReplayBuffer
from .samplers import PrioritizedSampler, UniformSampler
from .segment_tree import SegmentTree
from .sizes import bytes_per_transition
from .storage import TransitionStorage

__all__ = [
    "PrioritizedReplayBuffer",
    "PrioritizedSampler",
    "ReplayBatch",
    "ReplayBuffer",
    "SegmentTree",
    "TransitionStorage",
    "UniformSampler",
    "bytes_per_transition",
]
