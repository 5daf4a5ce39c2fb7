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

# The stratified draw stays this fraction below the total, so rounding never lands past it.
_SHRINK = 1 - 1e-6

__all__ = ["PrioritizedSampler", "UniformSampler"]


class UniformSampler:
    """Every sampleable record equally likely; weights are 1."""

    def __init__(
        self, capacity: int, *, device: torch.device | str = "cpu", backend: str = "auto"
    ) -> None:
        self.tree = SegmentTree(capacity, "sum", device=device, backend=backend)
        self.device = self.tree.device
        self.backend = self.tree.backend
        """The trees' backend: ``numba``, ``triton`` or ``torch``."""
        # [max priority or 1, rejected] and [alpha, epsilon, shrink], read by the kernels.
        self._state = torch.tensor([1.0, 0.0], dtype=torch.float64, device=self.device)
        self._params = torch.tensor([1.0, 0.0, _SHRINK], dtype=torch.float64, device=self.device)

    def activate(self, retired: torch.Tensor, activated: torch.Tensor) -> None:
        """Mark records unsampleable (``retired``) and sampleable (``activated``)."""
        if self.backend == "triton":
            self._triton_activate(retired, activated, None)
            return
        idx = torch.cat([retired, activated])
        values = torch.cat(
            [
                torch.zeros(retired.numel(), device=self.device),
                torch.ones(activated.numel(), device=self.device),
            ]
        )
        self.tree.set(idx, values)

    def _triton_activate(self, retired, activated, min_tree) -> None:
        from . import triton_trees

        retired = retired.reshape(-1).to(self.device, torch.long)
        activated = activated.reshape(-1).to(self.device, torch.long)
        n = retired.numel() + activated.numel()
        if n > triton_trees.MAX_FUSED:  # bulk: the generic path, a launch per level
            new = self._state[0].log().mul(self._params[0]).exp().float().expand(activated.numel())
            idx = torch.cat([retired, activated])
            zeros = torch.zeros(retired.numel(), device=self.device)
            self.tree.set(idx, torch.cat([zeros, new]))
            if min_tree is not None:
                min_tree.set(idx, torch.cat([zeros.add(torch.inf), new]))
            return
        # An empty tensor may have no storage: give the kernel a real (unread) pointer.
        first = retired if retired.numel() else activated
        second = activated if activated.numel() else retired
        triton_trees.write(
            self.tree,
            min_tree,
            first,
            None,
            mode=triton_trees.ACTIVATE,
            aux=second,
            n=n,
            n_first=retired.numel(),
            state=self._state,
            params=self._params,
        )

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

    def _stratified(self, r: torch.Tensor) -> torch.Tensor:
        """One target inside each of ``B`` equal slices of [0, total), in float64."""
        n = r.numel()
        total = self.tree.root().double()
        u = (torch.arange(n, device=self.device, dtype=torch.float64) + r.double()) * (total / n)
        return torch.minimum(u, total * self._params[2])

    def sample(
        self,
        batch_size: int,
        generator: torch.Generator | None = None,
        *,
        uniforms: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``batch_size`` record indices (stratified); weights are ones.

        Args:
            batch_size: rows drawn.
            generator: device generator for the uniforms (ignored when ``uniforms`` given).
            uniforms: ``batch_size`` numbers in [0, 1), one per stratum.
        """
        r = self._uniforms(batch_size, generator, uniforms)
        if self.backend == "triton":
            from . import triton_trees

            idx, _ = triton_trees.sample(self.tree, None, r, None, self._params[2:])
        else:
            idx = self.tree.find_prefix(self._stratified(r)).to(self.device)
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
        self.min_tree = SegmentTree(capacity, "min", device=device, backend=self.backend)
        self.alpha, self.epsilon = alpha, epsilon
        self.validate = self.device.type == "cpu" if validate is None else validate
        self._params[0], self._params[1] = alpha, epsilon
        self._beta = torch.zeros((), dtype=torch.float64, device=self.device)

    @property
    def max_priority(self) -> torch.Tensor:
        """Largest priority ``p`` (before ``alpha``) seen so far; new records get it."""
        return self._state[0]

    @property
    def rejected(self) -> torch.Tensor:
        """Priorities dropped for being negative or not finite (when not validating)."""
        return self._state[1]

    def _new_value(self, n: int) -> torch.Tensor:
        # exp(alpha * log p) in float64, rounded once: every backend's rule for p^alpha.
        return self.max_priority.log().mul(self.alpha).exp().float().expand(n)

    def activate(self, retired: torch.Tensor, activated: torch.Tensor) -> None:
        if self.backend == "triton":
            self._triton_activate(retired, activated, self.min_tree)
            return
        idx = torch.cat([retired, activated])
        new = self._new_value(activated.numel())
        self.tree.set(idx, torch.cat([torch.zeros(retired.numel(), device=self.device), new]))
        self.min_tree.set(
            idx, torch.cat([torch.full((retired.numel(),), torch.inf, device=self.device), new])
        )

    def sample(  # type: ignore[override]
        self,
        batch_size: int,
        generator: torch.Generator | None = None,
        beta: float | torch.Tensor = 0.4,
        *,
        uniforms: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``batch_size`` indices and their importance weights ``w_i / max_j w_j``.

        Args:
            batch_size: rows drawn.
            generator: device generator for the uniforms (ignored when ``uniforms`` given).
            beta: importance exponent in [0, 1]: a float (checked) or a 0-d device tensor
                (not checked: that would sync the host), e.g. annealed inside a graph.
            uniforms: ``batch_size`` numbers in [0, 1), one per stratum.

        Raises:
            ValueError: a float ``beta`` outside [0, 1], or badly shaped ``uniforms``.
        """
        tensor_beta = isinstance(beta, torch.Tensor)
        if not tensor_beta and not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta={beta}; accepted: a number in [0, 1]")
        r = self._uniforms(batch_size, generator, uniforms)
        if self.backend == "numba":
            from .segment_tree import _nb_stratified_sample

            idx = torch.empty(batch_size, dtype=torch.long)
            w = torch.empty(batch_size, dtype=torch.float32)
            t = self.tree
            _nb_stratified_sample(
                t._np,
                self.min_tree._np,
                t.offsets,
                t.arity,
                t.depth,
                r.numpy(),
                float(beta),
                idx.numpy(),
                w.numpy(),
            )
            return idx, w
        if tensor_beta:
            b = beta.to(self.device, torch.float64).reshape(())
        else:
            b = self._beta.fill_(beta)
        if self.backend == "triton":
            from . import triton_trees

            return triton_trees.sample(self.tree, self.min_tree, r, b, self._params[2:])
        idx = self.tree.descend(self._stratified(r))
        # Leaves hold p^alpha, so w_i / max_j w_j = (p_i^alpha / p_min^alpha)^-beta:
        # N and the total cancel. float64, rounded once, as in every backend.
        ratio = self.tree.leaves[idx].double() / self.min_tree.root().double()
        return idx, ratio.log().mul(-b).exp().float()

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
        if self.backend == "numba":
            from .segment_tree import _nb_priority_update

            t = self.tree
            _nb_priority_update(
                t._np,
                self.min_tree._np,
                t.offsets,
                t.arity,
                t.depth,
                idx.numpy(),
                pr.contiguous().numpy(),
                self.alpha,
                self.epsilon,
                self._state.numpy(),
            )
            return
        if self.backend == "triton":
            from . import triton_trees

            if idx.numel() <= triton_trees.MAX_FUSED:
                triton_trees.write(
                    self.tree,
                    self.min_tree,
                    idx,
                    pr.contiguous(),
                    mode=triton_trees.PRIORITY,
                    state=self._state,
                    params=self._params,
                )
                return
        ok = torch.isfinite(pr) & (pr >= 0)
        self._state[1] += (~ok).sum()
        p = pr.double() + self.epsilon
        keep = ok & (self.tree.leaves[idx] > 0)
        self._state[0] = torch.maximum(self._state[0], torch.where(keep, p, 0).amax())
        pa = torch.where(keep, p, 1.0).log().mul(self.alpha).exp().float()
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
        # In place: a captured graph keeps reading the same tensor.
        self._state.copy_(state["state"])
