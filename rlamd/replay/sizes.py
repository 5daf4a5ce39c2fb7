"""Device bytes per stored transition: the one formula the builder, buffer and bench use."""

from __future__ import annotations

import torch

from .samplers import TREE_ARITY, PrioritizedSampler, UniformSampler, tree_nodes
from .storage import TransitionStorage

__all__ = ["TREE_ARITY", "bytes_per_transition", "tree_nodes"]


def bytes_per_transition(
    obs_shape: tuple[int, ...],
    obs_dtype: torch.dtype,
    frame_stack: int,
    num_actions: int = 256,
    sampler: type[UniformSampler] | bool = UniformSampler,
    capacity: int | None = None,
    *,
    action_shape: tuple[int, ...] = (),
    action_dtype: torch.dtype | None = None,
    prioritized: bool | None = None,
) -> float:
    """Device bytes one transition costs: its record plus its share of the sampler's trees.

    Args:
        obs_shape, obs_dtype, frame_stack, num_actions, action_shape, action_dtype: the
            storage's layout (:class:`TransitionStorage`).
        sampler: the sampler class the buffer will hold (its trees' share:
            :meth:`UniformSampler.bytes_per_record`). ``True``/``False`` (and the
            ``prioritized`` keyword) are read as the prioritized/uniform sampler, for
            callers written before the samplers were passed in.
        capacity: transitions held; gives the exact tree share (padding included).
            ``None``: the share without padding, exact when ``capacity`` is a power of
            the arity.

    Returns:
        Bytes per transition (a float: the trees' share is fractional).
    """
    if prioritized is not None:
        sampler = prioritized
    if isinstance(sampler, bool):
        sampler = PrioritizedSampler if sampler else UniformSampler
    record = TransitionStorage.record_bytes(
        obs_shape, obs_dtype, frame_stack, num_actions, action_shape, action_dtype
    )
    return record + sampler.bytes_per_record(capacity)
