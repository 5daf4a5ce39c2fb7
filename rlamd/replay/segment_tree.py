"""k-ary sum and min trees held in one flat device tensor.

Layout (arity k = 4 shown, capacity 16)::

    level 0            [ root ]                                  offset 0
    level 1        [ a  b  c  d ]                                offset 1
    level 2  [ a0 a1 a2 a3 | b0 b1 b2 b3 | ... ]   (the leaves)  offset 5

Level ``l`` holds ``k**l`` nodes starting at ``(k**l - 1) / (k - 1)``; node ``i`` of level
``l`` has children ``i*k .. i*k + k-1`` on level ``l + 1``. A wide tree (k = 32 by default)
needs only ``ceil(log_k(capacity))`` levels: 4 for 2**20 leaves, so a batched descent
is 4 gathers for the whole batch.

Three backends share the layout and the arithmetic (:mod:`rlamd.replay.backends`, one
class each with the same methods, chosen once per tree):

* ``torch`` -- plain tensor ops on any device, no host synchronisation; the reference;
* ``numba`` -- compiled loops for CPU tensors (zero-copy numpy views), several times
  faster there because plain tensor ops pay a dispatch per op;
* ``triton`` -- fused kernels for GPU tensors (:mod:`rlamd.replay.triton_trees`): one
  launch per draw or write instead of dozens of small ops.

The arithmetic every backend follows, so that they build identical trees and descend
identically: nodes are float32; a parent sum adds its children left to right in float64
and rounds once; a descent compares the float64 target with the float64 running sum of
the children (the chosen child's exclusive prefix is subtracted) and keeps only positive
children. (On a GPU torch's ``cumsum`` adds in another order; that can only differ when a
float64 sum of 32 float32 values rounds.)

Writes with duplicate indices are deterministic: the largest value given for an index wins.
Parents are recomputed from their children on every write, so sums never drift.

``auto`` picks numba for CPU trees, triton for GPU trees (torch, with one log line, when
Triton does not import or cannot compile for the GPU); ``RLAMD_TREE_BACKEND`` overrides
``auto``.
"""

from __future__ import annotations

import functools
import logging
import math
import os

import numpy as np
import torch

from rlamd.config.errors import ConfigError, closest
from rlamd.device import describe_device
from rlamd.envvars import flag

from .backends import get_backend
from .numba_kernels import HAVE_NUMBA

__all__ = ["SegmentTree", "resolve_backend", "triton_unusable"]

_BACKENDS = ("auto", "torch", "numba", "triton")
_log = logging.getLogger(__name__)


@functools.cache
def _triton_import_error() -> str | None:
    """Why the Triton kernels cannot be used (``None``: they can). Imported once."""
    try:
        from . import triton_trees  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install raising anything else
        return f"{type(exc).__name__}: {exc}"
    return None


@functools.cache
def _warn_no_triton(reason: str) -> None:
    _log.warning(
        "Triton cannot serve the replay trees (%s): they use plain torch ops on the GPU, "
        "which sample more slowly",
        reason,
    )


@functools.cache
def _triton_device_error(device: torch.device) -> str | None:
    """Why Triton's kernels cannot run on ``device`` (``None``: they can).

    Importing Triton is not enough: each Triton release compiles for a list of GPU
    architectures (Triton 3.9 rejects RDNA2, gfx1030, the RX 6000 series), and a kernel
    may ask for more LDS, registers or threads than the GPU has. The largest launch of
    each kernel the trees make (a rebuild, a fused write of ``MAX_FUSED`` indices, a
    draw), compared with what it must give, answers for this GPU, its driver and this
    Triton; the compiled kernels stay in Triton's cache for the run.
    """
    from . import triton_trees

    step = "_rebuild_kernel"
    try:
        tree = SegmentTree(64, "sum", device=device, backend="torch")
        tree.leaves[:64] = 1.0
        triton_trees.rebuild(tree)
        total = float(tree.root())
        if total != 64.0:
            return f"a test launch summed 64 ones to {total}"
        n = triton_trees.MAX_FUSED
        step, big = "_write_kernel", SegmentTree(2 * n, "sum", device=device, backend="torch")
        idx = torch.arange(n, device=device)
        triton_trees.write(big, None, idx, torch.ones(n, device=device))
        step, u = "_sample_kernel", torch.rand(32, device=device)
        drawn, _ = triton_trees.sample(
            big, None, u, None, torch.ones(1, device=device, dtype=torch.float64)
        )
        if float(big.root()) != n or int(drawn.max()) >= n:
            return f"a test write of {n} ones summed to {float(big.root())}"
    except Exception as exc:  # a compiler or driver error, whatever its type
        first = str(exc).strip().splitlines()
        why = f"{type(exc).__name__}: {first[0] if first else ''}"[:300]
        if _out_of_resources(exc):
            return (
                f"rlamd replay: Triton kernel {step} is out of resources on {_arch(device)} "
                f"({first[0] if first else why}); these trees use torch ops from now on"
            )
        return f"Triton {triton_trees.triton.__version__} on {_arch(device)}: {why}"
    return None


def _out_of_resources(exc: BaseException) -> bool:
    """Triton's OutOfResources, or HIP/CUDA refusing the launch for its resources."""
    text = str(exc).lower()
    return type(exc).__name__ == "OutOfResources" or any(
        s in text
        for s in ("out of resource", "too many resources requested", "launchoutofresources")
    )


def _arch(device: torch.device) -> str:
    """The GPU's architecture as compilers name it: gfx1030, sm_90, ..."""
    try:
        return describe_device(device).arch or device.type
    except Exception:  # not a CUDA/HIP device (or no driver): its type says enough
        return device.type


def triton_unusable(device: torch.device | str) -> str | None:
    """Why the Triton backend cannot serve trees on ``device`` (``None``: it can)."""
    device = torch.device(device)
    reason = _triton_import_error()
    if reason is not None or device.type == "cpu":  # CPU tensors: the interpreter (tests)
        return reason
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return _triton_device_error(device)


def resolve_backend(backend: str, device: torch.device) -> str:
    """The backend ``backend`` means for trees on ``device``.

    ``auto`` (or ``RLAMD_TREE_BACKEND`` when set) is numba on the CPU (torch without
    numba), triton on GPUs (torch, logged once, where Triton cannot run there).

    Raises:
        ConfigError: (a ``ValueError``) an unknown name, numba off the CPU, or triton that
            cannot run there; named as ``RLAMD_TREE_BACKEND`` when that chose it.
    """
    source = "backend"
    if backend == "auto":  # an empty variable means unset
        backend = os.environ.get("RLAMD_TREE_BACKEND", "").strip().lower() or "auto"
        source = "RLAMD_TREE_BACKEND" if backend != "auto" else source
    if backend not in _BACKENDS:
        near = closest(backend, _BACKENDS)
        hint = f" (did you mean {near!r}?)" if near else ""
        raise ConfigError(f"{source}={backend!r}; accepted: {', '.join(_BACKENDS)}{hint}")
    if backend == "auto":
        if device.type == "cpu":
            return "numba" if HAVE_NUMBA else "torch"
        reason = triton_unusable(device)
        if reason is None:
            return "triton"
        _warn_no_triton(reason)
        return "torch"
    if backend == "numba" and (device.type != "cpu" or not HAVE_NUMBA):
        raise ConfigError(
            f"{source}='numba' needs numba installed and a CPU tree (this one is on {device}); "
            "accepted: 'torch' or 'auto' there"
        )
    if backend == "triton":
        reason = triton_unusable(device)
        interpreted = flag(os.environ, "TRITON_INTERPRET")
        if reason is None and device.type == "cpu" and source != "backend" and not interpreted:
            # Asked for by the variable: refused now, not at the first write mid-run.
            reason = "CPU tensors run only in its interpreter: TRITON_INTERPRET=1"
        if reason is not None:
            raise ConfigError(
                f"{source}='triton' but Triton cannot run on {device} ({reason}); "
                "accepted: 'torch' or 'auto' there"
            )
    return backend


class SegmentTree:
    """A k-ary sum or min tree over ``capacity`` leaves, on ``device``.

    Args:
        capacity: number of leaves (> 0).
        op: ``"sum"`` (empty leaves are 0) or ``"min"`` (empty leaves are +inf).
        arity: children per node (>= 2).
        device: where the tree lives.
        backend: ``torch``, ``numba`` (CPU only), ``triton`` (GPU tensors; CPU tensors
            run in Triton's interpreter, for tests) or ``auto`` (see
            :func:`resolve_backend`).
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
        self.device = torch.device(device)
        backend = resolve_backend(backend, self.device)
        self.capacity, self.op, self.arity, self.backend = capacity, op, arity, backend
        self.depth = max(1, math.ceil(math.log(capacity, arity) - 1e-9))
        while arity**self.depth < capacity:  # guard against log rounding
            self.depth += 1
        sizes = [arity**level for level in range(self.depth + 1)]
        self.offsets = np.cumsum([0, *sizes[:-1]]).astype(np.int64)
        self.offsets_dev = torch.from_numpy(self.offsets).to(self.device)
        self.fill = math.inf if op == "min" else 0.0
        self.flat = torch.full((sum(sizes),), self.fill, dtype=torch.float32, device=self.device)
        self.levels = [
            self.flat[int(o) : int(o) + s] for o, s in zip(self.offsets, sizes, strict=True)
        ]
        self.ops = get_backend(backend)
        """The backend's operations (:mod:`rlamd.replay.backends`), chosen once."""

    @property
    def leaves(self) -> torch.Tensor:
        """The leaf level (padded to ``arity**depth``); index ``i < capacity`` is item ``i``."""
        return self.levels[-1]

    def root(self) -> torch.Tensor:
        """Sum (or min) of all leaves, as a 0-d device tensor (no host sync)."""
        return self.flat[0]

    def nbytes(self) -> int:
        return self.flat.numel() * self.flat.element_size()

    def _parents(self, children: torch.Tensor) -> torch.Tensor:
        """Parent values of ``(n, arity)`` children: min, or a float64 sum rounded once
        (``cumsum`` adds left to right on the CPU, as numba and Triton do)."""
        if self.op == "min":
            return children.amin(1)
        return children.double().cumsum(1)[:, -1].float()

    def set(self, idx: torch.Tensor, values: torch.Tensor) -> None:
        """Write leaves ``idx`` (duplicates: the largest value wins) and repair ancestors."""
        idx = idx.reshape(-1).to(self.device, torch.long)
        values = values.reshape(-1).to(self.device, torch.float32)
        self.ops.set(self, idx, values)

    def repair(self, idx: torch.Tensor, values: torch.Tensor) -> None:
        """The torch reference of :meth:`set`: leaf writes, then one gather per level."""
        self.write_leaves(idx, values)
        node = idx
        for level in range(self.depth - 1, -1, -1):
            node = torch.div(node, self.arity, rounding_mode="floor")
            agg = self._parents(self.levels[level + 1].view(-1, self.arity)[node])
            # Duplicate parents receive identical values, so the write is deterministic.
            self.levels[level].index_copy_(0, node, agg)

    def write_leaves(self, idx: torch.Tensor, values: torch.Tensor) -> None:
        """Leaf writes only (duplicates: the largest wins); the caller repairs the parents
        (a bulk Triton write rebuilds the whole tree after)."""
        leaves = self.leaves
        leaves.index_fill_(0, idx, -math.inf)
        leaves.scatter_reduce_(0, idx, values, reduce="amax", include_self=True)

    def find_prefix(self, u: torch.Tensor) -> torch.Tensor:
        """Leaf indices ``i`` with ``sum(leaves[:i]) <= u < sum(leaves[:i+1])`` (sum trees).

        One batched descent for all rows; ``u`` in ``[0, root)``. Leaves with value 0 are
        never returned while the tree holds a positive leaf.
        """
        if self.op != "sum":
            raise ValueError("find_prefix needs a sum tree")
        return self.ops.find(self, u.reshape(-1).to(self.device, torch.float64))

    def descend(self, x: torch.Tensor) -> torch.Tensor:
        """The torch reference descent for float64 targets ``x`` (see the module notes)."""
        node = torch.zeros_like(x, dtype=torch.long)
        k = self.arity
        for level in range(1, self.depth + 1):
            block = self.levels[level].view(-1, k)[node]  # (B, k) children of each row's node
            b64 = block.double()
            csum = b64.cumsum(1)
            pos = block > 0
            hit = pos & (csum > x[:, None])
            # Past the end (rounding) or on an empty tail: take the last positive child.
            last = (k - 1) - pos.flip(1).to(torch.uint8).argmax(1)
            chosen = torch.where(hit.any(1), hit.to(torch.uint8).argmax(1), last)
            exclusive = torch.nn.functional.pad(csum[:, :-1], (1, 0))
            x = x - exclusive.gather(1, chosen[:, None]).squeeze(1)
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
        # A copy first: on the CPU a state_dict's leaves are a view of this very tree
        # (``.cpu()`` copies nothing), which the fill below would wipe.
        leaves = leaves.to(self.device, copy=True)
        self.flat.fill_(self.fill)
        idx = torch.arange(self.capacity, device=self.device)
        self.set(idx, leaves)
