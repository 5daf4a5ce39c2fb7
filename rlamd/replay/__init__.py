"""Device-resident replay: a storage and a sampler, composed (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from .buffer import Buffer, PrioritizedReplayBuffer, ReplayBatch, ReplayBuffer
from .samplers import PrioritizedSampler, Sampler, UniformSampler
from .segment_tree import SegmentTree
from .sizes import bytes_per_transition
from .storage import TransitionStorage

__all__ = [
    "Buffer",
    "PrioritizedReplayBuffer",
    "PrioritizedSampler",
    "ReplayBatch",
    "ReplayBuffer",
    "Sampler",
    "SegmentTree",
    "TransitionStorage",
    "UniformSampler",
    "bytes_per_transition",
]
