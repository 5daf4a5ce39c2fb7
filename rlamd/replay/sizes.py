"""Device bytes per stored transition: the one formula the builder, buffer and bench use."""

from __future__ import annotations

import math

import torch

from .segment_tree import SegmentTree
from .storage import TransitionStorage

__all__ = ["bytes_per_transition", "tree_nodes"]

TREE_ARITY: int = SegmentTree.__init__.__kwdefaults__["arity"]
"""Children per node of the samplers' trees (:class:`SegmentTree`'s default)."""


def tree_nodes(capacity: int, arity: int = TREE_ARITY) -> int:
    """Nodes (float32 each) of one :class:`SegmentTree` over ``capacity`` leaves,
    the leaf level padded to ``arity**depth``."""
    depth = max(1, math.ceil(math.log(capacity, arity) - 1e-9))
    while arity**depth < capacity:
        depth += 1
    return sum(arity**level for level in range(depth + 1))


def bytes_per_transition(
    obs_shape: tuple[int, ...],
    obs_dtype: torch.dtype,
    frame_stack: int,
    num_actions: int,
    prioritized: bool,
    capacity: int | None = None,
) -> float:
    """Device bytes one transition costs: its record plus its share of the sampler trees.

    Args:
        obs_shape, obs_dtype, frame_stack, num_actions: as for :class:`TransitionStorage`.
        prioritized: two trees (sum and min) instead of the uniform sampler's one.
        capacity: transitions held; gives the exact tree share (padding included).
            ``None``: the share without padding, ``4 * arity / (arity - 1)`` per tree,
            exact when ``capacity`` is a power of the arity.

    Returns:
        Bytes per transition (a float: the trees' share is fractional).
    """
    record = TransitionStorage.record_bytes(obs_shape, obs_dtype, frame_stack, num_actions)
    if capacity is None:
        per_tree = 4.0 * TREE_ARITY / (TREE_ARITY - 1)
    else:
        per_tree = 4.0 * tree_nodes(capacity) / capacity
    return record + (2 if prioritized else 1) * per_tree
