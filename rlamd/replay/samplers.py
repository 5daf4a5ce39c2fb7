"""Samplers: which stored records a batch draws, and with what importance weight.

Both samplers keep a :class:`SegmentTree` over every record of the storage, so that
sampling is one batched stratified descent on the device whatever the distribution:

* :class:`UniformSampler` writes 1 for sampleable records, 0 otherwise;
* :class:`PrioritizedSampler` (Schaul et al. 2016, https://arxiv.org/abs/1511.05952)
  writes ``p_i^alpha`` with ``p_i = |delta_i| + epsilon`` and returns importance weights

  .. math:: w_i = (N \\cdot P(i))^{-\\beta} / \\max_j w_j,\\qquad P(i) = p_i^\\alpha / \\sum_k p_k^\\alpha

  normalised by the largest possible weight (that of the smallest stored priority, kept
  by a min tree). New records get the running maximum priority, held on the device.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch

from .backends import Trees, new_values, stratified
from .segment_tree import SegmentTree

# The stratified draw stays this fraction below the total, so rounding never lands past it.
_SHRINK = 1 - 1e-6

__all__ = ["PrioritizedSampler", "Sampler", "UniformSampler", "tree_nodes"]

TREE_ARITY: int = SegmentTree.__init__.__kwdefaults__["arity"]
"""Children per node of the samplers' trees (:class:`SegmentTree`'s default)."""


def tree_nodes(capacity: int, arity: int = TREE_ARITY) -> int:
    """Nodes (float32 each) of one :class:`SegmentTree` over ``capacity`` leaves,
    the leaf level padded to ``arity**depth``."""
    depth = max(1, math.ceil(math.log(capacity, arity) - 1e-9))
    while arity**depth < capacity:
        depth += 1
    return sum(arity**level for level in range(depth + 1))


class Sampler(Protocol):
    """What a :class:`rlamd.replay.Buffer` needs of its sampler (either one below)."""

    capacity: int
    device: torch.device

    def activate(self, retired: torch.Tensor, activated: torch.Tensor) -> None: ...
    def sample(
        self,
        batch_size: int,
        generator: torch.Generator | None = None,
        beta: float | torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]: ...
    def update(self, idx: torch.Tensor, priorities: torch.Tensor) -> None: ...
    def nbytes(self) -> int: ...
    def clear(self) -> None: ...
    def state_dict(self) -> dict: ...
    def load_state_dict(self, state: dict) -> None: ...


class UniformSampler:
    """Every sampleable record equally likely; weights are 1.

    A sampler owns its trees and their backend (:mod:`rlamd.replay.backends`, chosen once
    from ``backend``) and hands the backend its :class:`~rlamd.replay.backends.Trees`;
    a buffer tells it which records became sampleable or stopped being so. The same
    code serves prioritized sampling, where the leaves hold ``p^alpha`` instead of 1
    (:class:`PrioritizedSampler`).

    Args:
        capacity: records in the storage.
        device, backend: as for :class:`SegmentTree`.
    """

    TREES = 1
    """Trees kept over the records (a sum tree)."""

    def __init__(
        self, capacity: int, *, device: torch.device | str = "cpu", backend: str = "auto"
    ) -> None:
        self.capacity = capacity
        self.tree = SegmentTree(capacity, "sum", device=device, backend=backend)
        self.min_tree: SegmentTree | None = None
        self.device = self.tree.device
        self.backend = self.tree.ops
        """The trees' backend object (``backend.name``: numba, triton or torch)."""
        self.alpha, self.epsilon = 1.0, 0.0
        # [max priority or 1, rejected] and [alpha, epsilon, shrink], read by the kernels.
        self.state = torch.tensor([1.0, 0.0], dtype=torch.float64, device=self.device)
        self.params = torch.tensor([1.0, 0.0, _SHRINK], dtype=torch.float64, device=self.device)
        self._trees = Trees(self.tree, None, self.state, self.params, 1.0, 0.0)

    @classmethod
    def bytes_per_record(cls, capacity: int | None = None) -> float:
        """Device bytes of this sampler's trees per record of a storage of ``capacity``
        (``None``: the share without padding, ``4 * arity / (arity - 1)`` per tree,
        exact when ``capacity`` is a power of the arity)."""
        if capacity is None:
            return cls.TREES * 4.0 * TREE_ARITY / (TREE_ARITY - 1)
        return cls.TREES * 4.0 * tree_nodes(capacity) / capacity

    def nbytes(self) -> int:
        """Device bytes this sampler's trees hold."""
        trees = (self.tree, self.min_tree)
        return sum(t.nbytes() for t in trees if t is not None)

    def new_values(self, n: int) -> torch.Tensor:
        """Leaf value of ``n`` newly sampleable records (1 when uniform, ``p_max^alpha``
        when prioritized; :func:`rlamd.replay.backends.new_values`)."""
        return new_values(self._trees, n)

    def stratified(self, r: torch.Tensor) -> torch.Tensor:
        """One float64 target inside each of ``B`` equal slices of the total."""
        return stratified(self._trees, r)

    def activate(self, retired: torch.Tensor, activated: torch.Tensor) -> None:
        """Mark records unsampleable (``retired``) and sampleable (``activated``)."""
        retired = retired.reshape(-1).to(self.device, torch.long)
        activated = activated.reshape(-1).to(self.device, torch.long)
        self.backend.activate(self._trees, retired, activated)

    def clear(self) -> None:
        """No record sampleable, the running maximum back to 1: a new sampler's state,
        in place (a captured graph keeps reading the same tensors)."""
        for tree in (self.tree, self.min_tree):
            if tree is not None:
                tree.flat.fill_(tree.fill)
        self.state.copy_(torch.tensor([1.0, 0.0], dtype=torch.float64))

    def _uniforms(
        self, batch_size: int, generator: torch.Generator | None, uniforms: torch.Tensor | None
    ) -> torch.Tensor:
        if uniforms is None:
            return torch.rand(batch_size, generator=generator, device=self.device)
        if uniforms.shape != (batch_size,):
            raise ValueError(
                f"uniforms has shape {tuple(uniforms.shape)}; accepted: ({batch_size},)"
            )
        return uniforms.to(self.device, torch.float32)

    def sample(
        self,
        batch_size: int,
        generator: torch.Generator | None = None,
        beta: float | torch.Tensor | None = None,
        *,
        uniforms: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``batch_size`` record indices (stratified); weights are ones.

        Args:
            batch_size: rows drawn.
            generator: device generator for the uniforms (ignored when ``uniforms`` given).
            beta: ignored (uniform weights are 1); accepted so that every sampler is
                called the same way.
            uniforms: ``batch_size`` numbers in [0, 1), one per stratum.
        """
        r = self._uniforms(batch_size, generator, uniforms)
        idx, _ = self.backend.draw(self._trees, r, None)
        return idx, torch.ones(batch_size, device=self.device)

    def update(self, idx: torch.Tensor, priorities: torch.Tensor) -> None:
        """Uniform sampling keeps no priorities: nothing to do."""

    def state_dict(self) -> dict:
        return {"tree": self.tree.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.tree.load_state_dict(state["tree"])


class PrioritizedSampler(UniformSampler):
    """Proportional prioritized sampling; see the module docstring.

    Args:
        capacity: records in the storage.
        alpha: priority exponent in [0, 1] (0 is uniform).
        epsilon: added to ``|delta|`` so no record gets probability 0 (> 0).
        device, backend: as for :class:`SegmentTree`.
        validate: check priorities eagerly (a host sync on a GPU). ``None`` validates on
            the CPU only; on a GPU bad priorities are then dropped on the device and
            counted in :attr:`rejected`.
    """

    TREES = 2
    """A sum tree to draw from and a min tree for the largest weight."""

    def __init__(
        self,
        capacity: int,
        *,
        alpha: float = 0.6,
        epsilon: float = 1e-6,
        device: torch.device | str = "cpu",
        backend: str = "auto",
        validate: bool | None = None,
    ) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha={alpha}; accepted: a number in [0, 1]")
        if not epsilon > 0.0:
            raise ValueError(f"epsilon={epsilon}; accepted: a number > 0")
        super().__init__(capacity, device=device, backend=backend)
        self.min_tree = SegmentTree(capacity, "min", device=device, backend=self.backend.name)
        self.alpha, self.epsilon = alpha, epsilon
        self.validate = self.device.type == "cpu" if validate is None else validate
        self.params[0], self.params[1] = alpha, epsilon
        self._trees = Trees(self.tree, self.min_tree, self.state, self.params, alpha, epsilon)
        self._beta = torch.zeros((), dtype=torch.float64, device=self.device)

    @property
    def max_priority(self) -> torch.Tensor:
        """Largest priority ``p`` (before ``alpha``) seen so far; new records get it."""
        return self.state[0]

    @property
    def rejected(self) -> torch.Tensor:
        """Priorities dropped for being negative or not finite (when not validating)."""
        return self.state[1]

    def sample(
        self,
        batch_size: int,
        generator: torch.Generator | None = None,
        beta: float | torch.Tensor | None = 0.4,
        *,
        uniforms: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``batch_size`` indices and their importance weights ``w_i / max_j w_j``.

        Args:
            batch_size: rows drawn.
            generator: device generator for the uniforms (ignored when ``uniforms`` given).
            beta: importance exponent in [0, 1]: a float (checked) or a 0-d tensor (not
                checked: that would sync the host), e.g. annealed inside a graph. Every
                backend takes either.
            uniforms: ``batch_size`` numbers in [0, 1), one per stratum.

        Raises:
            ValueError: a float ``beta`` outside [0, 1], or badly shaped ``uniforms``.
        """
        if isinstance(beta, torch.Tensor):
            b = beta.to(self.device, torch.float64).reshape(())
        elif beta is None or not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta={beta}; accepted: a number in [0, 1]")
        else:
            b = self._beta.fill_(beta)
        r = self._uniforms(batch_size, generator, uniforms)
        idx, weights = self.backend.draw(self._trees, r, b)
        return idx, weights

    def update(self, idx: torch.Tensor, priorities: torch.Tensor) -> None:
        """Set ``p_i = priorities_i + epsilon`` for sampled records ``idx`` (no host sync
        unless ``validate``). Records retired since they were sampled stay retired;
        duplicates: the largest priority wins."""
        idx = idx.to(self.device, torch.long).reshape(-1)
        pr = priorities.detach().to(self.device, torch.float32).reshape(-1)
        if pr.shape != idx.shape:
            raise ValueError(f"{pr.numel()} priorities for {idx.numel()} indices")
        if self.validate:
            ok = torch.isfinite(pr) & (pr >= 0)
            if not bool(ok.all()):
                bad = pr[~ok][:5].tolist()
                raise ValueError(
                    f"priorities must be finite and >= 0; got {bad} (first bad values)"
                )
        self.backend.update(self._trees, idx, pr)

    def state_dict(self) -> dict:
        return {
            "tree": self.tree.state_dict(),
            "min_tree": self.min_tree.state_dict(),
            "state": self.state.cpu(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.tree.load_state_dict(state["tree"])
        self.min_tree.load_state_dict(state["min_tree"])
        # In place: a captured graph keeps reading the same tensor.
        self.state.copy_(state["state"])
