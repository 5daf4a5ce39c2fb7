"""Triton kernels for the prioritized replay's sum and min trees (GPU backend).

The kernels follow the layout of :mod:`rlamd.replay.segment_tree` and the same arithmetic
as its torch reference (float64 accumulation and weights, float32 storage), so the three
backends build identical trees and draw identical indices from the same uniforms.

* :func:`sample` -- one launch: stratified draw, batched descent of the sum tree and the
  importance weights (read from the min tree's root);
* :func:`write` -- one launch: leaf writes (duplicates: the largest value wins) for a sum
  tree and, optionally, its min tree, then the ancestor repair of both, level by level
  inside one program. Prioritized updates and activate/retire compute their leaf values
  in the same launch, on the device, from the sampler's state.

A write of more than :data:`MAX_FUSED` indices (a checkpoint load, a bulk fill) uses the
torch leaf write plus one launch per level that rebuilds the whole level.

Launch sizes are chosen per target (:func:`target_of`, :func:`launch_options`): about 256
threads per program, i.e. ``num_warps`` = 256 / the wavefront (64 on CDNA, 32 on RDNA and
NVIDIA), ``num_stages=1`` on AMD (no pipelined loops here), and at most 2 lanes per thread in
a fused write (:data:`MAX_FUSED`), which keeps it within 256 VGPRs on RDNA and the LDS of
every target (64 KiB on CDNA and RDNA). The sample kernel keeps 4 warps everywhere: its
(lanes, children) tile's layout decides the order of the prefix sums, and so the rounding
the tests compare bit for bit. None of these choices changes what is computed.

Every launch is compiled without floating-point contraction (no fused multiply-adds), so
the GPU rounds as the torch reference and numba do.

Every launch reads its per-step scalars (beta, the running maximum priority) from device
tensors: no host synchronisation, fixed shapes, so sampling and updating can be captured
in a CUDA/HIP graph. On CPU tensors the same kernels run in Triton's interpreter
(``TRITON_INTERPRET=1`` set before Python starts; tests).
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from rlamd.device import describe_device
from rlamd.envvars import flag

__all__ = ["MAX_FUSED", "Target", "launch_options", "rebuild", "sample", "target_of", "write"]

MAX_FUSED = 512
"""Most indices one fused write handles in a single program (one block of lanes): 2 lanes
per thread at 256 threads. At 1024 lanes the write needs 288 VGPRs on gfx942 (more than
RDNA's 256); at 8192 it compiled for minutes."""
_THREADS = 256
"""Threads per program of the write and rebuild kernels, on every target."""
_SAMPLE_WARPS = 4


_UNIFIED_VGPRS = frozenset({"gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"})
"""CDNA2 and later: VGPRs and accumulation registers in one 512-entry file."""


class Target(NamedTuple):
    """What a GPU gives one program: its wavefront, LDS and threads."""

    arch: str
    """``gfx942``, ``gfx1100``, ``sm_90`` or ``cpu`` (Triton's interpreter)."""
    wavefront: int
    lds_bytes: int | None
    """LDS (shared memory) per workgroup, None where Triton asks the device."""
    max_threads: int = 1024
    max_vgprs: int | None = None
    """Architected VGPRs per lane and wave (AMD)."""

    @property
    def amd(self) -> bool:
        return self.arch.startswith("gfx")


def target_of(arch: str) -> Target:
    """The limits of ``arch`` (``gfx90a:sramecc+:xnack-`` reads as ``gfx90a``).

    CDNA and GCN (gfx9): wavefront 64, 64 KiB LDS (160 KiB on gfx950), 512 VGPRs with the
    accumulation registers (gfx90a and later); RDNA (gfx10-12): wavefront 32, 64 KiB, 256.
    """
    name = arch.split(":", 1)[0].strip().lower()
    if name.startswith("gfx9"):
        lds = 160 * 1024 if name == "gfx950" else 64 * 1024
        return Target(name, 64, lds, 1024, 512 if name in _UNIFIED_VGPRS else 256)
    if name.startswith("gfx1"):
        return Target(name, 32, 64 * 1024, 1024, 256)
    if name.startswith("sm_"):
        return Target(name, 32, None)
    return Target("cpu", 32, None)


def launch_options(kernel: str, target: Target) -> dict:
    """``num_warps`` (and ``num_stages`` on AMD) for ``kernel`` (sample, write, rebuild)."""
    warps = _SAMPLE_WARPS if kernel == "sample" else max(1, _THREADS // target.wavefront)
    return {"num_warps": warps, **({"num_stages": 1} if target.amd else {})}


@functools.cache
def _device_target(device: torch.device) -> Target:
    if device.type != "cuda":
        return target_of("cpu")
    return target_of(describe_device(device).arch or "cpu")


_SAMPLE_LANES = 32
"""Draws per program of a sample launch: each holds a (lanes, arity) tile per level."""

# Write modes (what the leaf values are computed from).
SET, PRIORITY, ACTIVATE = 0, 1, 2


def _sample_kernel(
    sum_ptr,
    min_ptr,
    offs_ptr,
    u_ptr,
    beta_ptr,
    shrink_ptr,
    idx_ptr,
    w_ptr,
    n,
    K: tl.constexpr,
    KP: tl.constexpr,
    DEPTH: tl.constexpr,
    WEIGHTS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n
    r = tl.load(u_ptr + lane, mask=live, other=0.0).to(tl.float64)
    total = tl.load(sum_ptr).to(tl.float64)
    # Stratified: one uniform in each of n equal slices of [0, total).
    x = (lane.to(tl.float64) + r) * (total / n)
    x = tl.minimum(x, total * tl.load(shrink_ptr))
    node = tl.zeros([BLOCK], dtype=tl.int64)
    kids = tl.arange(0, KP)[None, :]  # a (lanes, children) tile per level: one wide load
    for level in tl.static_range(1, DEPTH + 1):
        first = (tl.load(offs_ptr + level) + node * K)[:, None]
        v = tl.load(sum_ptr + first + kids, mask=live[:, None] & (kids < K), other=0.0)
        incl = tl.cumsum(v.to(tl.float64), axis=1)  # left to right, as the reference
        pos = v > 0.0
        hit = pos & (x[:, None] < incl)
        chosen = tl.min(tl.where(hit, kids, KP), axis=1)
        # Past the end (rounding) or an empty tail: the last positive child (K - 1: none).
        last = tl.max(tl.where(pos, kids, -1), axis=1)
        last = tl.where(last < 0, K - 1, last)
        chosen = tl.where(chosen == KP, last, chosen)
        # The chosen child's exclusive prefix: the inclusive one of its left neighbour.
        x = x - tl.sum(tl.where(kids == chosen[:, None] - 1, incl, 0.0), axis=1)
        node = node * K + chosen
    tl.store(idx_ptr + lane, node, mask=live)
    if WEIGHTS:
        leaf = tl.load(sum_ptr + tl.load(offs_ptr + DEPTH) + node, mask=live, other=1.0)
        ratio = leaf.to(tl.float64) / tl.load(min_ptr).to(tl.float64)
        w = tl.exp(-tl.load(beta_ptr).to(tl.float64) * tl.log(ratio))
        tl.store(w_ptr + lane, w.to(tl.float32), mask=live)


@triton.jit
def _activate_values(idx_ptr, aux_ptr, state_ptr, params_ptr, lane, live, n_first):
    """Indices and leaf values of an activate/retire: the first ``n_first`` lanes retire
    (``idx_ptr``), the rest activate (``aux_ptr``) at ``max_priority ** alpha``."""
    second = live & (lane >= n_first)
    i0 = tl.load(idx_ptr + lane, mask=live & (lane < n_first), other=0)
    i1 = tl.load(aux_ptr + (lane - n_first), mask=second, other=0)
    idx = tl.where(second, i1, i0).to(tl.int64)
    new = tl.exp(tl.load(params_ptr) * tl.log(tl.load(state_ptr))).to(tl.float32)
    return idx, tl.where(second, new, 0.0), tl.where(second, new, float("inf"))


@triton.jit
def _priority_values(sum_ptr, min_ptr, leaf, val_ptr, state_ptr, params_ptr, lane, live):
    """Leaf values of a priority update, ``(p + eps) ** alpha``; a bad priority (counted in
    ``state[1]``) or a retired record keeps its value; ``state[0]`` is the running max."""
    pr = tl.load(val_ptr + lane, mask=live, other=0.0)
    ok = (pr >= 0.0) & (pr < float("inf"))  # NaN fails both
    cur_s = tl.load(sum_ptr + leaf, mask=live, other=0.0)
    cur_m = tl.load(min_ptr + leaf, mask=live, other=0.0)
    keep = live & ok & (cur_s > 0.0)  # retired records stay retired
    p = pr.to(tl.float64) + tl.load(params_ptr + 1)
    pa = tl.exp(tl.load(params_ptr) * tl.log(tl.where(keep, p, 1.0))).to(tl.float32)
    top = tl.max(tl.where(keep, p, 0.0), axis=0)
    bad = tl.sum(tl.where(live & (ok == 0), 1.0, 0.0).to(tl.float64), axis=0)
    tl.store(state_ptr, tl.maximum(tl.load(state_ptr), top))
    tl.store(state_ptr + 1, tl.load(state_ptr + 1) + bad)
    return tl.where(keep, pa, cur_s), tl.where(keep, pa, cur_m)


@triton.jit
def _repair(
    sum_ptr,
    min_ptr,
    offs_ptr,
    node,
    live,
    K: tl.constexpr,
    DEPTH: tl.constexpr,
    HAS_MIN: tl.constexpr,
    SUM_IS_MIN: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Recompute the ancestors of leaves ``node``, level by level (a barrier after each)."""
    for up in tl.static_range(DEPTH):
        level = DEPTH - 1 - up
        node = node // K
        first = tl.load(offs_ptr + level + 1) + node * K
        s_acc = tl.zeros([BLOCK], dtype=tl.float64)
        m_acc = tl.full([BLOCK], float("inf"), dtype=tl.float32)
        for c in tl.static_range(K):
            v = tl.load(sum_ptr + first + c, mask=live, other=0.0, volatile=True)
            if SUM_IS_MIN:
                m_acc = tl.minimum(m_acc, v)
            else:
                s_acc = s_acc + v.to(tl.float64)
            if HAS_MIN:
                m_acc = tl.minimum(
                    m_acc, tl.load(min_ptr + first + c, mask=live, other=0.0, volatile=True)
                )
        parent = tl.load(offs_ptr + level) + node
        # Lanes sharing a parent store the same value: the write is deterministic.
        if SUM_IS_MIN:
            tl.store(sum_ptr + parent, m_acc, mask=live)
        else:
            tl.store(sum_ptr + parent, s_acc.to(tl.float32), mask=live)
        if HAS_MIN:
            tl.store(min_ptr + parent, m_acc, mask=live)
        tl.debug_barrier()


def _write_kernel(
    sum_ptr,
    min_ptr,
    offs_ptr,
    idx_ptr,
    aux_ptr,
    val_ptr,
    state_ptr,
    params_ptr,
    n,
    n_first,
    K: tl.constexpr,
    DEPTH: tl.constexpr,
    MODE: tl.constexpr,
    HAS_MIN: tl.constexpr,
    SUM_IS_MIN: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """One program: leaf values, leaf writes, then the ancestors, level by level.

    MODE SET: ``val_ptr`` holds the values (the same for both trees).
    MODE PRIORITY: ``val_ptr`` holds priorities; ``state`` = [max priority, rejected].
    MODE ACTIVATE: see :func:`_activate_values`.
    """
    lane = tl.arange(0, BLOCK)
    live = lane < n
    leaf_off = tl.load(offs_ptr + DEPTH)
    if MODE == 2:
        idx, sval, mval = _activate_values(
            idx_ptr, aux_ptr, state_ptr, params_ptr, lane, live, n_first
        )
    else:
        idx = tl.load(idx_ptr + lane, mask=live, other=0).to(tl.int64)
        if MODE == 1:
            sval, mval = _priority_values(
                sum_ptr, min_ptr, leaf_off + idx, val_ptr, state_ptr, params_ptr, lane, live
            )
        else:
            sval = tl.load(val_ptr + lane, mask=live, other=0.0)
            mval = sval
    # Every lane has read its current leaves before any lane resets a duplicate's.
    tl.debug_barrier()
    # Leaves: reset, then the largest value of each index wins (order-free, deterministic).
    tl.store(sum_ptr + leaf_off + idx, float("-inf"), mask=live)
    if HAS_MIN:
        tl.store(min_ptr + leaf_off + idx, float("-inf"), mask=live)
    tl.debug_barrier()
    tl.atomic_max(sum_ptr + leaf_off + idx, sval, mask=live)
    if HAS_MIN:
        tl.atomic_max(min_ptr + leaf_off + idx, mval, mask=live)
    tl.debug_barrier()
    _repair(sum_ptr, min_ptr, offs_ptr, idx, live, K, DEPTH, HAS_MIN, SUM_IS_MIN, BLOCK)


def _rebuild_kernel(
    tree_ptr,
    child_off,
    parent_off,
    n_parents,
    K: tl.constexpr,
    IS_MIN: tl.constexpr,
    BLOCK: tl.constexpr,
):
    node = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = node < n_parents
    first = child_off + node.to(tl.int64) * K
    s_acc = tl.zeros([BLOCK], dtype=tl.float64)
    m_acc = tl.full([BLOCK], float("inf"), dtype=tl.float32)
    for c in tl.static_range(K):
        v = tl.load(tree_ptr + first + c, mask=live, other=0.0)
        if IS_MIN:
            m_acc = tl.minimum(m_acc, v)
        else:
            s_acc = s_acc + v.to(tl.float64)
    if IS_MIN:
        tl.store(tree_ptr + parent_off + node, m_acc, mask=live)
    else:
        tl.store(tree_ptr + parent_off + node, s_acc.to(tl.float32), mask=live)


_KERNELS = None


def _pick(t: torch.Tensor) -> tuple:
    """The three kernels (compiled once). CPU tensors need Triton's interpreter, which
    Triton turns on at import time from ``TRITON_INTERPRET=1``."""
    global _KERNELS
    if t.device.type == "cpu" and not _interpreting():
        raise ValueError(
            "backend='triton' on CPU tensors runs only in Triton's interpreter: set "
            "TRITON_INTERPRET=1 before Python starts; accepted: GPU tensors, or that variable"
        )
    if _KERNELS is None:
        _KERNELS = tuple(triton.jit(f) for f in (_sample_kernel, _write_kernel, _rebuild_kernel))
    return _KERNELS


def _interpreting() -> bool:
    return flag(os.environ, "TRITON_INTERPRET")  # as Triton reads it: 1, true or on


def _block(n: int) -> int:
    return max(16, triton.next_power_of_2(n))


def sample(
    sum_tree, min_tree, u: torch.Tensor, beta: torch.Tensor | None, shrink: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Stratified prioritized draw in one launch.

    Args:
        sum_tree, min_tree: :class:`~rlamd.replay.segment_tree.SegmentTree` (min may be
            ``None`` when ``beta`` is ``None``: no weights).
        u: ``B`` uniforms in [0, 1) on the trees' device.
        beta: 0-d float64 device tensor, or ``None`` for no weights.
        shrink: 1-element float64 device tensor, ``1 - 1e-6``: the draw stays below the total.

    Returns:
        int64 leaf indices and float32 weights ``(p_i / p_min) ** -beta`` (or ``None``).
    """
    n = u.numel()
    idx = torch.empty(n, dtype=torch.long, device=u.device)
    weights = torch.empty(n, dtype=torch.float32, device=u.device) if beta is not None else None
    block = min(_block(n), _SAMPLE_LANES)
    kern = _pick(u)[0]
    kern[(triton.cdiv(n, block),)](
        sum_tree.flat,
        (min_tree or sum_tree).flat,
        sum_tree.offsets_dev,
        u,
        beta if beta is not None else shrink,
        shrink,
        idx,
        weights if weights is not None else u,
        n,
        K=sum_tree.arity,
        KP=triton.next_power_of_2(sum_tree.arity),
        DEPTH=sum_tree.depth,
        WEIGHTS=beta is not None,
        BLOCK=block,
        enable_fp_fusion=False,
        **launch_options("sample", _device_target(u.device)),
    )
    return idx, weights


def write(
    sum_tree,
    min_tree,
    idx: torch.Tensor,
    values: torch.Tensor,
    *,
    mode: int = SET,
    aux: torch.Tensor | None = None,
    n: int | None = None,
    n_first: int = 0,
    state: torch.Tensor | None = None,
    params: torch.Tensor | None = None,
) -> None:
    """Leaf writes and ancestor repair of ``sum_tree`` (and ``min_tree``) in one launch.

    ``sum_tree`` may be a min tree when ``min_tree`` is ``None`` (a single-tree set).
    For ``mode=ACTIVATE``, the first ``n_first`` of the ``n`` records are the retired
    ones (read from ``idx``), the rest the activated ones (from ``aux``).
    ``params`` is a float64 device tensor ``[alpha, epsilon, 1 - 1e-6]``.
    """
    if n is None:
        n = idx.numel() + (aux.numel() if aux is not None else 0)
    if n == 0:
        return
    dummy = sum_tree.flat
    kern = _pick(sum_tree.flat)[1]
    kern[(1,)](
        sum_tree.flat,
        (min_tree or sum_tree).flat,
        sum_tree.offsets_dev,
        idx,
        aux if aux is not None else idx,
        values if values is not None else dummy,
        state if state is not None else dummy,
        params if params is not None else dummy,
        n,
        n_first,
        K=sum_tree.arity,
        DEPTH=sum_tree.depth,
        MODE=mode,
        HAS_MIN=min_tree is not None,
        SUM_IS_MIN=sum_tree.op == "min",
        BLOCK=_block(n),
        enable_fp_fusion=False,
        **launch_options("write", _device_target(sum_tree.flat.device)),
    )


def rebuild(tree) -> None:
    """Recompute every inner node of ``tree`` from its leaves, one launch per level."""
    kern = _pick(tree.flat)[2]
    block = 256
    for level in range(tree.depth - 1, -1, -1):
        parents = tree.arity**level
        kern[(triton.cdiv(parents, block),)](
            tree.flat,
            int(tree.offsets[level + 1]),
            int(tree.offsets[level]),
            parents,
            K=tree.arity,
            IS_MIN=tree.op == "min",
            BLOCK=block,
            enable_fp_fusion=False,
            **launch_options("rebuild", _device_target(tree.flat.device)),
        )
