"""PPO's rollout storage and its training rows, with GAE(lambda) on the device.

GAE (Schulman et al. 2016, https://arxiv.org/abs/1506.02438) with episode ends inside the
rollout: :math:`\\delta_t = r_t + \\gamma V'_t - V(s_t)`,
:math:`A_t = \\delta_t + \\gamma\\lambda (1 - e_t) A_{t+1}`, where :math:`e_t` marks an
episode end at t and :math:`V'_t` is 0 after a termination, :math:`V(\\text{final obs})`
after a truncation (bootstrapped), and :math:`V(s_{t+1})` otherwise.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["PPORows", "Rollout", "compute_gae"]


@torch.no_grad()
def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    ended: torch.Tensor,
    next_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns for ``(T, N)`` tensors, on their device.

    Args:
        rewards: r_t.
        values: V(s_t).
        ended: 1 where the episode (for learning) ended at t, terminated or truncated.
        next_values: V'_t, the value to bootstrap from after step t (see the module docstring).
    """
    T = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[0])
    keep = 1.0 - ended.float()
    for t in range(T - 1, -1, -1):
        delta = rewards[t] + gamma * next_values[t] - values[t]
        last = delta + gamma * lam * keep[t] * last
        adv[t] = last
    return adv, adv + values


class PPORows(NamedTuple):
    """Flat training rows of one or more rollouts (``B`` rows each), GAE included."""

    obs: torch.Tensor
    actions: torch.Tensor
    """``(B,)`` int64 discrete actions, or ``(B, k)`` float32 continuous ones (unclipped)."""
    logprobs: torch.Tensor
    """log pi_old(a|s) when acting."""
    values: torch.Tensor
    """V_old(s) when acting."""
    advantages: torch.Tensor
    returns: torch.Tensor

    @classmethod
    def cat(cls, parts: list[PPORows], device: torch.device) -> PPORows:
        """Several actors' rows as one batch on ``device``."""
        return cls(*(torch.cat(column).to(device) for column in zip(*parts, strict=True)))


class Rollout:
    """Preallocated device storage for ``num_steps`` x ``num_envs`` transitions.

    Observations stay in their env dtype (uint8 for Atari) until the network. Actions are
    int64 indices, or with ``action_size`` float32 vectors of that length (continuous).
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        obs_dtype: torch.dtype,
        device: torch.device,
        action_size: int | None = None,
    ) -> None:
        T, N = num_steps, num_envs
        self.obs = torch.zeros((T, N, *obs_shape), dtype=obs_dtype, device=device)
        if action_size is None:
            self.actions = torch.zeros((T, N), dtype=torch.long, device=device)
        else:
            self.actions = torch.zeros((T, N, action_size), device=device)
        self.logprobs = torch.zeros((T, N), device=device)
        self.values = torch.zeros((T, N), device=device)
        self.rewards = torch.zeros((T, N), device=device)
        self.terminated = torch.zeros((T, N), device=device)
        self.ended = torch.zeros((T, N), device=device)
        self.bootstrap = torch.zeros((T, N), device=device)  # V(final obs) where truncated
        self.num_steps, self.num_envs = T, N

    def next_values(self, last_value: torch.Tensor) -> torch.Tensor:
        """V'_t: V(s_{t+1}) inside an episode, V(final obs) after a truncation, 0 after a
        termination."""
        following = torch.cat([self.values[1:], last_value[None]], 0)
        after_end = self.bootstrap * (1.0 - self.terminated)
        return torch.where(self.ended > 0, after_end, following)
