"""k-ary sum and min trees held in one flat device tensor.

Layout (arity k = 4 shown, capacity 16)::

    level 0            [ root ]                                  offset 0
    level 1        [ a  b  c  d ]                                offset 1
    level 2  [ a0 a1 a2 a3 | b0 b1 b2 b3 | ... ]   (the leaves)  offset 5

Level ``l`` holds ``k**l`` nodes starting at ``(k**l - 1) / (k - 1)``; node ``i`` of level
``l`` has children ``i*k .. i*k + k-1`` on level ``l + 1``. A wide tree (k = 32 by default)
needs only ``ceil(log_k(capacity))`` levels: 4 for 2**20 leaves, so a batched descent
is 4 gathers for the whole batch.

Two implementations share the layout:

* ``torch`` -- plain tensor ops on any device, no host synchronisation; the reference;
* ``numba`` -- compiled loops for CPU tensors (zero-copy numpy views), several times
  faster there because plain tensor ops pay a dispatch per op.

Writes with duplicate indices are deterministic: the largest value given for an index wins.
Parents are recomputed from their children on every write, so sums never drift.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["SegmentTree", "numba_available"]

_BACKENDS = ("auto", "torch", "numba")

try:  # numba is a runtime dependency; its absence only costs CPU speed.
    from numba import njit

    _HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    _HAVE_NUMBA = False


def numba_available() -> bool:
    return _HAVE_NUMBA


if _HAVE_NUMBA:

    @njit(cache=True, nogil=True)
    def _nb_write(tree, offsets, arity, depth, idx, values, is_min):  # pragma: no cover
        leaf = offsets[depth]
        for b in range(idx.shape[0]):
            tree[leaf + idx[b]] = -np.inf
        for b in range(idx.shape[0]):
            j = leaf + idx[b]
            if values[b] > tree[j]:
                tree[j] = values[b]
        for b in range(idx.shape[0]):
            node = idx[b]
            for level in range(depth - 1, -1, -1):
                node //= arity
                first = offsets[level + 1] + node * arity
                acc = tree[first]
                for c in range(1, arity):
                    v = tree[first + c]
                    if is_min:
                        if v < acc:
                            acc = v
                    else:
                        acc += v
                tree[offsets[level] + node] = acc

    @njit(cache=True, nogil=True, inline="always")
    def _nb_descend_one(tree, offsets, arity, depth, x):  # pragma: no cover
        node = 0
        for level in range(1, depth + 1):
            first = offsets[level] + node * arity
            chosen = -1
            last = 0
            last_v = 0.0
            for c in range(arity):
                v = tree[first + c]
                if v > 0.0:
                    last = c
                    last_v = v
                    if x < v:
                        chosen = c
                        break
                    x -= v
            if chosen < 0:  # rounding left x past the end: take the last positive child
                chosen = last
                x += last_v
            node = node * arity + chosen
        return node

    @njit(cache=True, nogil=True)
    def _nb_descend(tree, offsets, arity, depth, u, out):  # pragma: no cover
        for b in range(u.shape[0]):
            out[b] = _nb_descend_one(tree, offsets, arity, depth, u[b])

    @njit(cache=True, nogil=True)
    def _nb_stratified_sample(
        sum_tree, min_tree, offsets, arity, depth, r, beta, out_idx, out_w
    ):  # pragma: no cover
        """Fused prioritized draw: stratified u, descent, importance weights."""
        batch = r.shape[0]
        total = sum_tree[0]
        p_min = min_tree[0]
        leaf = offsets[depth]
        for b in range(batch):
            u = (b + r[b]) * (total / batch)
            hi = total * (1.0 - 1e-6)
            if u > hi:
                u = hi
            i = _nb_descend_one(sum_tree, offsets, arity, depth, u)
            out_idx[b] = i
            out_w[b] = (sum_tree[leaf + i] / p_min) ** (-beta)

    @njit(cache=True, nogil=True)
    def _nb_priority_update(
        sum_tree, min_tree, offsets, arity, depth, idx, pr, alpha, eps, state
    ):  # pragma: no cover
        """Fused priority update; state = [max_priority, rejected]. Bad or retired
        entries keep their current value; duplicates: the largest value wins."""
        leaf = offsets[depth]
        vals = np.empty(idx.shape[0], dtype=np.float32)
        mins = np.empty(idx.shape[0], dtype=np.float32)
        for b in range(idx.shape[0]):
            j = leaf + idx[b]
            p = pr[b]
            ok = np.isfinite(p) and p >= 0.0
            if not ok:
                state[1] += 1.0
            if ok and sum_tree[j] > 0.0:
                p = p + eps
                if p > state[0]:
                    state[0] = p
                vals[b] = p**alpha
                mins[b] = vals[b]
            else:
                vals[b] = sum_tree[j]
                mins[b] = min_tree[j]
        _nb_write(sum_tree, offsets, arity, depth, idx, vals, False)
        _nb_write(min_tree, offsets, arity, depth, idx, mins, True)


class SegmentTree:
    """A k-ary sum or min tree over ``capacity`` leaves, on ``device``.

    Args:
        capacity: number of leaves (> 0).
        op: ``"sum"`` (empty leaves are 0) or ``"min"`` (empty leaves are +inf).
        arity: children per node (>= 2).
        device: where the tree lives.
        backend: ``torch``, ``numba`` (CPU only) or ``auto`` (numba on the CPU).
    """

    def __init__(
        self,
        capacity: int,
        op: str = "sum",
        *,
        arity: int = 32,
        device: torch.device | str = "cpu",
        backend: str = "auto",
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity={capacity}; accepted: an integer > 0")
        if op not in ("sum", "min"):
            raise ValueError(f"op={op!r}; accepted: 'sum', 'min'")
        if arity < 2:
            raise ValueError(f"arity={arity}; accepted: an integer >= 2")
        if backend not in _BACKENDS:
            raise ValueError(f"backend={backend!r}; accepted: {', '.join(_BACKENDS)}")
        self.device = torch.device(device)
        if backend == "auto":
            backend = "numba" if self.device.type == "cpu" and _HAVE_NUMBA else "torch"
        if backend == "numba" and (self.device.type != "cpu" or not _HAVE_NUMBA):
            raise ValueError("backend='numba' needs numba installed and a CPU tree")
        self.capacity, self.op, self.arity, self.backend = capacity, op, arity, backend
        self.depth = max(1, math.ceil(math.log(capacity, arity) - 1e-9))
        while arity**self.depth < capacity:  # guard against log rounding
            self.depth += 1
        sizes = [arity**level for level in range(self.depth + 1)]
        self.offsets = np.cumsum([0, *sizes[:-1]]).astype(np.int64)
        self.fill = math.inf if op == "min" else 0.0
        self.flat = torch.full((sum(sizes),), self.fill, dtype=torch.float32, device=self.device)
        self.levels = [
            self.flat[int(o) : int(o) + s] for o, s in zip(self.offsets, sizes, strict=True)
        ]
        self._np = self.flat.numpy() if backend == "numba" else None

    @property
    def leaves(self) -> torch.Tensor:
        """The leaf level (padded to ``arity**depth``); index ``i < capacity`` is item ``i``."""
        return self.levels[-1]

    def root(self) -> torch.Tensor:
        """Sum (or min) of all leaves, as a 0-d device tensor (no host sync)."""
        return self.flat[0]

    def nbytes(self) -> int:
        return self.flat.numel() * self.flat.element_size()

    def set(self, idx: torch.Tensor, values: torch.Tensor) -> None:
        """Write leaves ``idx`` (duplicates: the largest value wins) and repair ancestors."""
        idx = idx.reshape(-1).to(self.device, torch.long)
        values = values.reshape(-1).to(self.device, torch.float32)
        if self.backend == "numba":
            _nb_write(
                self._np, self.offsets, self.arity, self.depth,
                idx.numpy(), values.numpy(), self.op == "min",
            )  # fmt: skip
            return
        leaves = self.leaves
        leaves.index_fill_(0, idx, -math.inf)
        leaves.scatter_reduce_(0, idx, values, reduce="amax", include_self=True)
        node = idx
        for level in range(self.depth - 1, -1, -1):
            node = torch.div(node, self.arity, rounding_mode="floor")
            children = self.levels[level + 1].view(-1, self.arity)[node]
            agg = children.amin(1) if self.op == "min" else children.sum(1)
            # Duplicate parents receive identical values, so the write is deterministic.
            self.levels[level].index_copy_(0, node, agg)

    def find_prefix(self, u: torch.Tensor) -> torch.Tensor:
        """Leaf indices ``i`` with ``sum(leaves[:i]) <= u < sum(leaves[:i+1])`` (sum trees).

        One batched descent for all rows; ``u`` in ``[0, root)``. Leaves with value 0 are
        never returned while the tree holds a positive leaf.
        """
        if self.op != "sum":
            raise ValueError("find_prefix needs a sum tree")
        u = u.reshape(-1).to(self.device, torch.float32)
        if self.backend == "numba":
            out = np.empty(u.shape[0], dtype=np.int64)
            _nb_descend(self._np, self.offsets, self.arity, self.depth, u.numpy(), out)
            return torch.from_numpy(out)
        x = u.clone()
        node = torch.zeros_like(u, dtype=torch.long)
        k = self.arity
        for level in range(1, self.depth + 1):
            block = self.levels[level].view(-1, k)[node]  # (B, k) children of each row's node
            csum = block.cumsum(1)
            chosen = (csum <= x[:, None]).sum(1)
            # Past the end (rounding) or on an empty tail: take the last positive child.
            last = (k - 1) - (block > 0).flip(1).to(torch.uint8).argmax(1)
            chosen = torch.minimum(chosen, last)
            x = x - (csum - block).gather(1, chosen[:, None]).squeeze(1)
            node = node * k + chosen
        return node

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"leaves": self.leaves[: self.capacity].cpu()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        leaves = state["leaves"]
        if leaves.shape != (self.capacity,):
            raise ValueError(
                f"tree state has {tuple(leaves.shape)} leaves; this tree has ({self.capacity},)"
            )
        self.flat.fill_(self.fill)
        idx = torch.arange(self.capacity, device=self.device)
        self.set(idx, leaves.to(self.device))
