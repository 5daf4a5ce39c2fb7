"""Replay buffers: a :class:`Buffer` composes a storage and a sampler passed in.

Example:
    >>> import torch
    >>> from rlamd.replay import Buffer, PrioritizedSampler, TransitionStorage
    >>> storage = TransitionStorage(100_000, 8, (4, 84, 84), torch.uint8, frame_stack=4,
    ...                             num_actions=4, n_step=3)
    >>> buf = Buffer(storage, PrioritizedSampler(storage.capacity, alpha=0.5))
    >>> # buf.add(obs, actions, rewards, terminated, done, final_obs) once per env step
    >>> # batch = buf.sample(32, beta=0.4); ...; buf.update_priorities(batch.indices, td)

The storage says which records became sampleable; the buffer hands that to the sampler,
which owns its trees and backend and never reads the storage. Uniform and prioritized
replay are two samplers (:class:`UniformSampler`, :class:`PrioritizedSampler`), and the
storage holds discrete or continuous actions alike (TorchRL's ``ReplayBuffer(storage=,
sampler=)`` and Dopamine's replay are built the same way). :class:`ReplayBuffer` and
:class:`PrioritizedReplayBuffer` build both parts from one argument list.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .samplers import PrioritizedSampler, Sampler, UniformSampler
from .storage import TransitionStorage

__all__ = ["Buffer", "PrioritizedReplayBuffer", "ReplayBatch", "ReplayBuffer"]


class ReplayBatch(NamedTuple):
    """A sampled batch; every field is a device tensor with ``batch_size`` rows."""

    obs: torch.Tensor
    """Observations (uint8 stacks for Atari)."""
    actions: torch.Tensor
    """Actions taken: int64 when discrete, float ``(B, *action_shape)`` when continuous."""
    returns: torch.Tensor
    """n-step discounted rewards, float32."""
    next_obs: torch.Tensor
    """Observation to bootstrap from, after the steps taken."""
    discounts: torch.Tensor
    """gamma^m for the m steps taken; 0 where the episode terminated (no bootstrap)."""
    weights: torch.Tensor
    """Importance-sampling weights (1 for uniform replay)."""
    indices: torch.Tensor
    """Record indices, for :meth:`Buffer.update_priorities`."""


class Buffer:
    """A device-resident replay: ``storage`` records, ``sampler`` draws.

    Args:
        storage: where transitions live (:class:`TransitionStorage`).
        sampler: which records a batch draws, and their weights; built for
            ``storage.capacity`` records on ``storage.device``.
        seed: seeds the buffer's own generator (the sampler's uniforms).

    Raises:
        ValueError: a sampler of another size or on another device than the storage.
    """

    def __init__(self, storage: TransitionStorage, sampler: Sampler, *, seed: int = 0) -> None:
        if sampler.capacity != storage.capacity or sampler.device != storage.device:
            raise ValueError(
                f"the sampler covers {sampler.capacity} records on {sampler.device}; "
                f"accepted: the storage's {storage.capacity} on {storage.device}"
            )
        self.storage, self.sampler = storage, sampler
        self.device = storage.device
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)

    def __len__(self) -> int:
        """Transitions that can be sampled now."""
        return self.storage.size

    @property
    def capacity(self) -> int:
        return self.storage.capacity

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        done: np.ndarray,
        final_obs: np.ndarray | None = None,
        streams: np.ndarray | None = None,
    ) -> np.ndarray:
        """Store one vector-env step (see :meth:`TransitionStorage.add`); returns the
        record index written for each row."""
        retired, activated, pos = self.storage.add(
            obs, actions, rewards, terminated, done, final_obs, streams
        )
        self.sampler.activate(
            torch.from_numpy(retired).to(self.device, non_blocking=True),
            torch.from_numpy(activated).to(self.device, non_blocking=True),
        )
        return pos

    def sample(self, batch_size: int, beta: float | torch.Tensor | None = None) -> ReplayBatch:
        """Draw ``batch_size`` transitions; no host synchronisation.

        ``beta`` is the importance exponent of a prioritized sampler (a float in [0, 1] or
        a 0-d tensor, e.g. one a captured graph reads); the uniform sampler ignores it, so
        every replay is sampled the same way.

        Raises:
            ValueError: ``batch_size`` < 1 or more than the transitions stored.
        """
        if batch_size < 1 or batch_size > len(self):
            raise ValueError(
                f"cannot sample batch_size={batch_size}: the buffer holds {len(self)} "
                f"sampleable transitions; accepted: 1 to {len(self)}"
            )
        idx, weights = self.sampler.sample(batch_size, self.generator, beta)
        st = self.storage
        win = st.window(idx)
        both = st.stacks(torch.cat([idx, win.next_index]))
        return ReplayBatch(
            obs=both[:batch_size],
            actions=st.read_actions(idx),
            returns=win.returns,
            next_obs=both[batch_size:],
            discounts=win.discounts,
            weights=weights,
            indices=idx,
        )

    def update_priorities(self, indices: torch.Tensor, priorities: torch.Tensor) -> None:
        """Set new priorities (e.g. ``|TD error|``) for sampled ``indices``; the uniform
        sampler keeps none, so there it does nothing (every replay is updated the same way)."""
        self.sampler.update(indices, priorities)

    def nbytes_per_transition(self) -> float:
        """Device bytes per stored transition: a record plus the sampler's trees' share."""
        return self.storage.bytes_per_record() + self.sampler.nbytes() / self.capacity

    def state_dict(self, include_contents: bool = True) -> dict:
        """Configuration always; records, priorities and the RNG when ``include_contents``."""
        state = {"storage": self.storage.state_dict(include_contents)}
        if include_contents:
            state["sampler"] = self.sampler.state_dict()
            state["generator"] = self.generator.get_state()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Take saved records and priorities; a state without contents empties the buffer."""
        self.storage.load_state_dict(state["storage"])
        if "sampler" in state:
            self.sampler.load_state_dict(state["sampler"])
            self.generator.set_state(state["generator"])
        else:
            self.sampler.clear()


class ReplayBuffer(Buffer):
    """Uniform replay: ``Buffer(TransitionStorage(...), UniformSampler(...))`` from one
    argument list.

    Args:
        capacity: transitions kept (over all envs).
        num_envs: envs writing one row each per :meth:`add`.
        obs_shape, obs_dtype: one env's observation.
        frame_stack: store only the newest of ``k`` stacked frames (Atari: 4).
        num_actions: size of the discrete action space.
        n_step, gamma: n-step returns.
        device: where everything lives (default: the CPU; pass the learner's device).
        seed: seeds the buffer's own generator.
        backend: segment-tree backend (``auto``: numba on the CPU, triton on GPUs; see
            :func:`~rlamd.replay.segment_tree.resolve_backend`).
        action_shape, action_dtype: continuous actions (:class:`TransitionStorage`).

    (Keywords but ``seed`` and ``backend`` go to :class:`TransitionStorage` as they are.)
    """

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype: torch.dtype = torch.float32,
        *,
        seed: int = 0,
        backend: str = "auto",
        **options,
    ) -> None:
        chosen = {k: options.pop(k) for k in self.SAMPLER_OPTIONS if k in options}
        storage = TransitionStorage(capacity, num_envs, obs_shape, obs_dtype, **options)
        sampler = self._sampler(storage.capacity, storage.device, backend, **chosen)
        super().__init__(storage, sampler, seed=seed)

    SAMPLER_OPTIONS: tuple[str, ...] = ()
    """Keywords that go to the sampler (the rest go to the storage)."""

    @staticmethod
    def _sampler(capacity: int, device: torch.device, backend: str) -> Sampler:
        return UniformSampler(capacity, device=device, backend=backend)


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016) on the device:
    ``Buffer(TransitionStorage(...), PrioritizedSampler(...))`` from one argument list.

    Takes :class:`ReplayBuffer`'s arguments plus ``alpha``, ``epsilon`` and ``validate``
    (see :class:`PrioritizedSampler`). ``beta`` is passed to :meth:`sample` (the caller
    anneals it).
    """

    SAMPLER_OPTIONS = ("alpha", "epsilon", "validate")

    @staticmethod
    def _sampler(  # type: ignore[override]
        capacity: int,
        device: torch.device,
        backend: str,
        alpha: float = 0.6,
        epsilon: float = 1e-6,
        validate: bool | None = None,
    ) -> Sampler:
        return PrioritizedSampler(
            capacity,
            alpha=alpha,
            epsilon=epsilon,
            device=device,
            backend=backend,
            validate=validate,
        )

    def sample(  # type: ignore[override]
        self, batch_size: int, beta: float | torch.Tensor = 0.4
    ) -> ReplayBatch:
        """As :meth:`Buffer.sample`; ``beta`` a float in [0, 1] or a 0-d device tensor
        (read on the device, e.g. annealed inside a captured graph)."""
        return super().sample(batch_size, beta=beta)
