"""The replay trees' three backends: one class each, with the same methods, chosen once.

A backend does every operation on a :class:`~rlamd.replay.segment_tree.SegmentTree` and
on a sampler's :class:`Trees` (its sum tree, its min tree when prioritized, and its device
state), which the sampler hands over as arguments; a backend never holds a sampler:

========================  =====================================================
``set(tree, idx, v)``     leaf writes (largest value wins) and ancestor repair
``find(tree, u)``         batched prefix-sum descent for float64 targets
``activate(t, ret, act)`` retire records (0) and activate records (``p_max^alpha``)
``draw(t, r, beta)``      stratified draw from uniforms ``r``; importance weights
                          ``(p_i / p_min)^-beta`` when ``beta`` (a 0-d float64
                          tensor) is given, else ``None``
``update(t, idx, pr)``    new priorities ``(|pr| + eps)^alpha`` for drawn records
========================  =====================================================

* :class:`TorchBackend` -- plain tensor ops on any device, no host synchronisation: the
  reference the others are tested against (and what GPUs use where Triton cannot run);
* :class:`NumbaBackend` -- compiled loops over zero-copy numpy views of CPU tensors
  (:mod:`rlamd.replay.numba_kernels`); reads ``beta`` once per draw;
* :class:`TritonBackend` -- one fused launch per draw or write on GPUs
  (:mod:`rlamd.replay.triton_trees`; on CPU tensors, Triton's interpreter, for tests).

The samplers (:mod:`rlamd.replay.samplers`) hold a backend and never ask which one it is.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch

from . import numba_kernels as nb

__all__ = [
    "BACKENDS",
    "NumbaBackend",
    "TorchBackend",
    "Trees",
    "TritonBackend",
    "get_backend",
    "new_values",
    "stratified",
]


class Trees(NamedTuple):
    """What a sampler hands a backend: its trees and the device values its kernels read."""

    sums: Any
    """The sum tree (leaves ``p^alpha``; 1 or 0 when uniform)."""
    mins: Any | None
    """The min tree of a prioritized sampler (None when uniform)."""
    state: torch.Tensor
    """float64 ``[max priority (1 when uniform), priorities rejected]``."""
    params: torch.Tensor
    """float64 ``[alpha, epsilon, shrink]``."""
    alpha: float
    epsilon: float


def new_values(t: Trees, n: int) -> torch.Tensor:
    """Leaf value of ``n`` newly sampleable records: ``p_max^alpha`` (1 when uniform).

    ``exp(alpha * log p)`` in float64, rounded once: every backend's rule for p^alpha.
    """
    return t.state[0].log().mul(t.alpha).exp().float().expand(n)


def stratified(t: Trees, r: torch.Tensor) -> torch.Tensor:
    """One target inside each of ``B`` equal slices of [0, total), in float64."""
    n = r.numel()
    total = t.sums.root().double()
    u = (torch.arange(n, device=r.device, dtype=torch.float64) + r.double()) * (total / n)
    return torch.minimum(u, total * t.params[2])


class TorchBackend:
    """Plain torch ops (the reference); see the module docstring for the methods."""

    name = "torch"

    def set(self, tree: Any, idx: torch.Tensor, values: torch.Tensor) -> None:
        tree.repair(idx, values)

    def find(self, tree: Any, u: torch.Tensor) -> torch.Tensor:
        return tree.descend(u)

    def activate(self, t: Trees, retired: torch.Tensor, activated: torch.Tensor) -> None:
        idx = torch.cat([retired, activated])
        new = new_values(t, activated.numel())
        zeros = torch.zeros(retired.numel(), device=t.sums.device)
        t.sums.set(idx, torch.cat([zeros, new]))
        if t.mins is not None:
            t.mins.set(idx, torch.cat([zeros.add(math.inf), new]))

    def draw(
        self, t: Trees, r: torch.Tensor, beta: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        idx = t.sums.find_prefix(stratified(t, r)).to(t.sums.device)
        if beta is None:
            return idx, None
        # Leaves hold p^alpha, so w_i / max_j w_j = (p_i^alpha / p_min^alpha)^-beta:
        # N and the total cancel. float64, rounded once, as in every backend.
        ratio = t.sums.leaves[idx].double() / t.mins.root().double()
        return idx, ratio.log().mul(-beta).exp().float()

    def update(self, t: Trees, idx: torch.Tensor, pr: torch.Tensor) -> None:
        state, tree, mins = t.state, t.sums, t.mins
        ok = torch.isfinite(pr) & (pr >= 0)
        state[1] += (~ok).sum()
        p = pr.double() + t.epsilon
        keep = ok & (tree.leaves[idx] > 0)
        state[0] = torch.maximum(state[0], torch.where(keep, p, 0).amax())
        pa = torch.where(keep, p, 1.0).log().mul(t.alpha).exp().float()
        # A dropped priority keeps the record's current value.
        tree.set(idx, torch.where(keep, pa, tree.leaves[idx]))
        mins.set(idx, torch.where(keep, pa, mins.leaves[idx]))


class NumbaBackend(TorchBackend):
    """Compiled loops on CPU trees (fused draw with weights, fused priority update)."""

    name = "numba"

    def set(self, tree: Any, idx: torch.Tensor, values: torch.Tensor) -> None:
        nb._nb_write(
            tree.flat.numpy(),
            tree.offsets,
            tree.arity,
            tree.depth,
            idx.numpy(),
            values.numpy(),
            tree.op == "min",
        )

    def find(self, tree: Any, u: torch.Tensor) -> torch.Tensor:
        out = torch.empty(u.shape[0], dtype=torch.long)
        nb._nb_descend(
            tree.flat.numpy(), tree.offsets, tree.arity, tree.depth, u.numpy(), out.numpy()
        )
        return out

    def draw(
        self, t: Trees, r: torch.Tensor, beta: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if beta is None:
            return super().draw(t, r, None)
        n, s = r.numel(), t.sums
        idx = torch.empty(n, dtype=torch.long)
        w = torch.empty(n, dtype=torch.float32)
        nb._nb_stratified_sample(
            s.flat.numpy(),
            t.mins.flat.numpy(),
            s.offsets,
            s.arity,
            s.depth,
            r.numpy(),
            float(beta),  # a CPU tensor: read once per draw, no device to wait for
            idx.numpy(),
            w.numpy(),
        )
        return idx, w

    def update(self, t: Trees, idx: torch.Tensor, pr: torch.Tensor) -> None:
        s = t.sums
        nb._nb_priority_update(
            s.flat.numpy(),
            t.mins.flat.numpy(),
            s.offsets,
            s.arity,
            s.depth,
            idx.numpy(),
            pr.contiguous().numpy(),
            t.alpha,
            t.epsilon,
            t.state.numpy(),
        )


class TritonBackend(TorchBackend):
    """Fused Triton launches: one per draw, one per write of up to ``MAX_FUSED`` records."""

    name = "triton"

    def set(self, tree: Any, idx: torch.Tensor, values: torch.Tensor) -> None:
        from . import triton_trees

        if idx.numel() <= triton_trees.MAX_FUSED:
            triton_trees.write(tree, None, idx, values)
        else:
            tree.write_leaves(idx, values)
            triton_trees.rebuild(tree)

    def activate(self, t: Trees, retired: torch.Tensor, activated: torch.Tensor) -> None:
        from . import triton_trees

        n = retired.numel() + activated.numel()
        if n > triton_trees.MAX_FUSED:  # bulk: the generic path, a launch per level
            super().activate(t, retired, activated)
            return
        # An empty tensor may have no storage: give the kernel a real (unread) pointer.
        first = retired if retired.numel() else activated
        second = activated if activated.numel() else retired
        triton_trees.write(
            t.sums,
            t.mins,
            first,
            None,
            mode=triton_trees.ACTIVATE,
            aux=second,
            n=n,
            n_first=retired.numel(),
            state=t.state,
            params=t.params,
        )

    def draw(
        self, t: Trees, r: torch.Tensor, beta: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        from . import triton_trees

        min_tree = t.mins if beta is not None else None
        return triton_trees.sample(t.sums, min_tree, r, beta, t.params[2:])

    def update(self, t: Trees, idx: torch.Tensor, pr: torch.Tensor) -> None:
        from . import triton_trees

        if idx.numel() > triton_trees.MAX_FUSED:
            super().update(t, idx, pr)
            return
        triton_trees.write(
            t.sums,
            t.mins,
            idx,
            pr.contiguous(),
            mode=triton_trees.PRIORITY,
            state=t.state,
            params=t.params,
        )


BACKENDS: dict[str, TorchBackend] = {
    b.name: b for b in (TorchBackend(), NumbaBackend(), TritonBackend())
}


def get_backend(name: str) -> TorchBackend:
    """The backend object for a resolved name (see ``segment_tree.resolve_backend``)."""
    return BACKENDS[name]
