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

import torch

from .segment_tree import SegmentTree

__all__ = ["PrioritizedSampler", "UniformSampler"]


class UniformSampler:
    """Every sampleable record equally likely; weights are 1."""

    def __init__(
        self, capacity: int, *, device: torch.device | str = "cpu", backend: str = "auto"
    ) -> None:
        self.tree = SegmentTree(capacity, "sum", device=device, backend=backend)
        self.device = self.tree.device

    def activate(self, retired: torch.Tensor, activated: torch.Tensor) -> None:
        """Mark records unsampleable (``retired``) and sampleable (``activated``)."""
        idx = torch.cat([retired, activated])
        values = torch.cat(
            [
                torch.zeros(retired.numel(), device=self.device),
                torch.ones(activated.numel(), device=self.device),
            ]
        )
        self.tree.set(idx, values)

    def _stratified(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        # One uniform draw inside each of batch_size equal slices of [0, total).
        u = torch.rand(batch_size, generator=generator, device=self.device)
        total = self.tree.root()
        u = (torch.arange(batch_size, device=self.device) + u) * (total / batch_size)
        return torch.minimum(u, total * (1 - 1e-6))

    def sample(
        self, batch_size: int, generator: torch.Generator, size: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self.tree.find_prefix(self._stratified(batch_size, generator)).to(self.device)
        return idx, torch.ones(batch_size, device=self.device)

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
        self.min_tree = SegmentTree(capacity, "min", device=device, backend=backend)
        self.alpha, self.epsilon = alpha, epsilon
        self.validate = self.device.type == "cpu" if validate is None else validate
        # [largest priority p seen (before alpha), priorities rejected], on the device.
        self._state = torch.tensor([1.0, 0.0], dtype=torch.float64, device=self.device)
        self._fused = self.tree.backend == "numba"

    @property
    def max_priority(self) -> torch.Tensor:
        """Largest priority ``p`` (before ``alpha``) seen so far; new records get it."""
        return self._state[0]

    @property
    def rejected(self) -> torch.Tensor:
        """Priorities dropped for being negative or not finite (when not validating)."""
        return self._state[1]

    def activate(self, retired: torch.Tensor, activated: torch.Tensor) -> None:
        idx = torch.cat([retired, activated])
        new = self.max_priority.pow(self.alpha).float().expand(activated.numel())
        self.tree.set(idx, torch.cat([torch.zeros(retired.numel(), device=self.device), new]))
        self.min_tree.set(
            idx, torch.cat([torch.full((retired.numel(),), torch.inf, device=self.device), new])
        )

    def sample(self, batch_size: int, generator: torch.Generator, size: int, beta: float = 0.4) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta={beta}; accepted: a number in [0, 1]")
        if self._fused:
            from .segment_tree import _nb_stratified_sample

            r = torch.rand(batch_size, generator=generator)
            idx = torch.empty(batch_size, dtype=torch.long)
            w = torch.empty(batch_size, dtype=torch.float32)
            t = self.tree
            _nb_stratified_sample(t._np, self.min_tree._np, t.offsets, t.arity, t.depth,
                                  r.numpy(), beta, idx.numpy(), w.numpy())  # fmt: skip
            return idx, w
        idx = self.tree.find_prefix(self._stratified(batch_size, generator)).to(self.device)
        # Leaves hold p^alpha, so w_i / max_j w_j = (p_i^alpha / p_min^alpha)^-beta:
        # N and the total cancel.
        weights = (self.tree.leaves[idx] / self.min_tree.root()).pow(-beta)
        return idx, weights

    def update(self, idx: torch.Tensor, priorities: torch.Tensor) -> None:
        """Set ``p_i = priorities_i + epsilon`` for sampled records ``idx`` (no host sync
        unless ``validate``). Records retired since they were sampled stay retired."""
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
        if self._fused:
            from .segment_tree import _nb_priority_update

            t = self.tree
            _nb_priority_update(t._np, self.min_tree._np, t.offsets, t.arity, t.depth, idx.numpy(),
                                pr.contiguous().numpy(), self.alpha, self.epsilon, self._state.numpy())  # fmt: skip
            return
        ok = torch.isfinite(pr) & (pr >= 0)
        self._state[1] += (~ok).sum()
        p = torch.where(ok, pr + self.epsilon, torch.zeros_like(pr))
        keep = ok & (self.tree.leaves[idx] > 0)
        self._state[0] = torch.maximum(self._state[0], torch.where(keep, p, 0).amax().double())
        pa = p.pow(self.alpha)
        # A dropped priority keeps the record's current value.
        self.tree.set(idx, torch.where(keep, pa, self.tree.leaves[idx]))
        self.min_tree.set(idx, torch.where(keep, pa, self.min_tree.leaves[idx]))

    def state_dict(self) -> dict:
        return {
            "tree": self.tree.state_dict(),
            "min_tree": self.min_tree.state_dict(),
            "state": self._state.cpu(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.tree.load_state_dict(state["tree"])
        self.min_tree.load_state_dict(state["min_tree"])
        self._state = state["state"].to(self.device)
