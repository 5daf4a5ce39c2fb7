"""The Collector: steps a vector env with a policy on the device (docs/ARCHITECTURE.md, data flow).

It owns the env and its current observations, makes the one host round trip per env
step that the env needs (actions to the host, observations to the device), and hands
finished episodes' real scores to whoever logs them. The same object runs in a single
process or inside a Ray rollout actor.

It is where the env's output enters rlamd: each env checks its own returns against its
spaces (:class:`rlamd.envs.checks.CheckedEnv`), and the collector counts non-finite
observations and rewards per env index on each batch (:class:`rlamd.envs.EnvHealth`,
vectorised on the host arrays, read once per log interval). Ctrl-C while the env steps
becomes :class:`rlamd.envs.EnvInterrupted`: the run can still write its checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from rlamd.envs import EnvHealth, EnvInterrupted, Step, VecEnv
from rlamd.profiling import span

__all__ = ["Collector"]


class Collector:
    """Steps ``env`` with actions from a device policy.

    Args:
        env: the vector env.
        device: where the policy runs (observations are copied there).
        seed: first reset seed (env i gets ``seed + i``).
    """

    def __init__(self, env: VecEnv, device: torch.device, seed: int) -> None:
        self.env, self.device = env, device
        self.health = EnvHealth(env.num_envs, env.name or "the env")
        """Non-finite observations and rewards counted as they arrive."""
        try:
            self.obs = env.reset(seed=seed)
        except KeyboardInterrupt:
            raise EnvInterrupted(f"interrupted in {env.name}'s reset()") from None
        self.health.check_obs(self.obs)
        pin = device.type == "cuda"
        self._staging = torch.empty(self.obs.shape, dtype=torch.from_numpy(self.obs[:1]).dtype)
        # Recorded after each copy out of the pinned buffer: the next write waits for it.
        self._copied: torch.cuda.Event | None = None
        if pin:
            self._staging = self._staging.pin_memory()
            self._copied = torch.cuda.Event()
        self._copy_pending = False

    @property
    def num_envs(self) -> int:
        return self.env.num_envs

    def obs_tensor(self, obs: np.ndarray | None = None) -> torch.Tensor:
        """Current observations on the device (through pinned memory on a GPU).

        The copy to the GPU runs asynchronously from the pinned buffer, so a later call
        first waits for the previous copy (usually long done) before overwriting it.
        """
        if self._copy_pending:
            self._copied.synchronize()
        self._staging.copy_(torch.from_numpy(self.obs if obs is None else obs))
        out = self._staging.to(self.device, non_blocking=True)
        if self._copied is not None:
            self._copied.record()
            self._copy_pending = True
        return out

    def step(
        self, policy: Callable[[torch.Tensor], torch.Tensor]
    ) -> tuple[np.ndarray, np.ndarray, Step]:
        """Act on the current observations and step the env.

        Returns ``(obs_before, chosen, step)``: ``obs_before`` is the host array the
        actions were chosen from, ``chosen`` the policy's actions; ``step.actions`` holds
        the actions executed (FIRE may be forced after a lost life), which is what a
        replay buffer stores.
        """
        self.send(policy)
        return self.recv()

    def send(self, policy: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Act and start the env step: with ale-py's C++ vector env the envs step on their
        own threads until :meth:`recv`, so the caller can learn meanwhile."""
        with span("act"):
            self._chosen = policy(self.obs_tensor()).cpu().numpy()
        with span("env"):
            try:
                self.env.send(self._chosen)
            except KeyboardInterrupt:
                raise EnvInterrupted(f"interrupted in {self.env.name}'s step()") from None

    def recv(self) -> tuple[np.ndarray, np.ndarray, Step]:
        """Finish the step :meth:`send` started: ``(obs_before, chosen, step)`` as :meth:`step`."""
        with span("env"):
            try:
                step = self.env.recv()
            except KeyboardInterrupt:
                raise EnvInterrupted(f"interrupted in {self.env.name}'s step()") from None
        health = self.health
        health.check_obs(step.obs)
        health.check_reward(step.reward)
        if step.done.any():
            rows = np.flatnonzero(step.done)
            health.check_obs(step.final_obs[rows], rows)
        before, self.obs = self.obs, step.obs
        return before, self._chosen, step

    def close(self) -> None:
        self.env.close()
