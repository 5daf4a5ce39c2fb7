"""n-step returns over windows of steps: the one rule the replay and Ape-X's workers share.

A window of ``n`` steps counts rewards up to and including the first step that stops it
(an episode end, or the end of the data), never past it::

    G = sum_{j < m} gamma^j r_j,   m = steps counted (1..n)

What is bootstrapped after the window (``gamma^m V(s_m)``, or nothing after a
termination) depends on where the data lives, so the callers add it.
"""

from __future__ import annotations

import torch

__all__ = ["gamma_powers", "nstep_window"]


def gamma_powers(gamma: float, n_step: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """``[gamma^0, ..., gamma^n]`` as float32 on ``device``."""
    return gamma ** torch.arange(n_step + 1, dtype=torch.float32, device=device)


def nstep_window(
    rewards: torch.Tensor, stop: torch.Tensor, powers: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """n-step returns and step counts of ``B`` windows (device ops, no host sync).

    Args:
        rewards: ``(B, n)`` float rewards of the window's steps.
        stop: ``(B, n)`` bool: the window ends after this step (its reward still counts).
        powers: :func:`gamma_powers` of the same ``n``.

    Returns:
        ``(returns (B,) float32, steps (B,) int64)``, ``steps`` in 1..n.
    """
    s = stop.to(torch.int32)
    ended_before = torch.cumsum(s, 1) - s
    alive = (ended_before == 0).to(torch.float32)
    returns = (rewards.to(torch.float32) * alive * powers[:-1]).sum(1)
    return returns, alive.sum(1).to(torch.long)
