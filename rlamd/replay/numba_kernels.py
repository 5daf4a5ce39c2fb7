"""numba kernels for CPU trees: the numba backend of :mod:`rlamd.replay.backends`.

They follow the layout and arithmetic of :mod:`rlamd.replay.segment_tree` (float32 nodes,
parent sums in float64 rounded once, descents on float64 running sums) on zero-copy numpy
views of CPU tensors; several times faster there than plain tensor ops, which pay a
dispatch per op.
"""

from __future__ import annotations

import numpy as np

try:  # numba is a runtime dependency; its absence only costs CPU speed.
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA"]

if HAVE_NUMBA:

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
                if is_min:
                    m = tree[first]
                    for c in range(1, arity):
                        if tree[first + c] < m:
                            m = tree[first + c]
                    tree[offsets[level] + node] = m
                else:  # float64 accumulation, one rounding: the backends' shared rule
                    acc = 0.0
                    for c in range(arity):
                        acc += np.float64(tree[first + c])
                    tree[offsets[level] + node] = acc

    @njit(cache=True, nogil=True, inline="always")
    def _nb_descend_one(tree, offsets, arity, depth, x):  # pragma: no cover
        x = np.float64(x)
        node = 0
        for level in range(1, depth + 1):
            first = offsets[level] + node * arity
            chosen = -1
            last = arity - 1
            acc = 0.0
            last_ex = 0.0
            for c in range(arity):
                v = tree[first + c]
                if v > 0.0:  # adding an empty child leaves the running sum as it is
                    nxt = acc + v
                    if x < nxt:
                        chosen = c
                        break
                    last = c
                    last_ex = acc
                    acc = nxt
            if chosen < 0:  # rounding left x past the end: take the last positive child
                chosen = last
                acc = last_ex
            x -= acc
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
        total = np.float64(sum_tree[0])
        p_min = np.float64(min_tree[0])
        leaf = offsets[depth]
        for b in range(batch):
            u = (b + r[b]) * (total / batch)
            hi = total * (1.0 - 1e-6)
            if u > hi:
                u = hi
            i = _nb_descend_one(sum_tree, offsets, arity, depth, u)
            out_idx[b] = i
            out_w[b] = np.exp(-beta * np.log(np.float64(sum_tree[leaf + i]) / p_min))

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
            p = np.float64(pr[b])
            ok = np.isfinite(p) and p >= 0.0
            if not ok:
                state[1] += 1.0
            if ok and sum_tree[j] > 0.0:
                p = p + eps
                if p > state[0]:
                    state[0] = p
                vals[b] = np.exp(alpha * np.log(p))
                mins[b] = vals[b]
            else:
                vals[b] = sum_tree[j]
                mins[b] = min_tree[j]
        _nb_write(sum_tree, offsets, arity, depth, idx, vals, False)
        _nb_write(min_tree, offsets, arity, depth, idx, mins, True)
