"""PPO's two policy distributions, as plain functions of device tensors.

No ``torch.distributions``: its argument validation synchronises with the host on every
call, and these run inside captured steps (docs/ARCHITECTURE.md, rule 2).

* :class:`Categorical` over ``n`` discrete actions, from logits ``l``:
  :math:`\\pi(a|s) = \\mathrm{softmax}(l)_a`, entropy :math:`-\\sum_a \\pi_a \\log \\pi_a`.
  Sampling is Gumbel-max with the agent's own generator.
* :class:`DiagGaussian` over ``k`` continuous dimensions, from means :math:`\\mu(s)` and a
  learned state-independent :math:`\\log\\sigma` (CleanRL ppo_continuous_action):

  .. math::
      \\log \\pi(a|s) = \\sum_{i=1}^{k} \\Big(-\\tfrac12 \\big(\\tfrac{a_i - \\mu_i}{\\sigma_i}\\big)^2
          - \\log\\sigma_i - \\tfrac12 \\log 2\\pi\\Big),\\qquad
      H = \\sum_{i=1}^{k} \\big(\\tfrac12 + \\tfrac12\\log 2\\pi + \\log\\sigma_i\\big)

  The sample :math:`a = \\mu + \\sigma \\epsilon`, :math:`\\epsilon \\sim N(0, I)`, is stored
  unclipped (its log-probability is exact); the env gets it clipped to its bounds.
"""

from __future__ import annotations

import math

import torch

__all__ = ["Categorical", "DiagGaussian"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class Categorical:
    """Discrete actions from logits ``(B, n)``; actions are ``(B,)`` int64."""

    continuous = False

    @staticmethod
    def sample(
        logits: torch.Tensor, generator: torch.Generator, greedy: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(actions, log-probabilities)``; ``greedy`` takes the most likely action."""
        if greedy:
            action = logits.argmax(1)
        else:  # Gumbel-max: a categorical draw with the agent's own generator
            u = torch.rand(logits.shape, generator=generator, device=logits.device)
            action = (logits - torch.log(-torch.log(u.clamp_min(1e-20)))).argmax(1)
        logprob = torch.log_softmax(logits, 1).gather(1, action[:, None]).squeeze(1)
        return action, logprob

    @staticmethod
    def log_prob(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(logits, 1).gather(1, actions[:, None]).squeeze(1)

    @staticmethod
    def log_prob_entropy(
        logits: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log pi(a|s) per row, mean entropy)`` in float32."""
        logp_all = torch.log_softmax(logits.float(), 1)
        new_lp = logp_all.gather(1, actions[:, None]).squeeze(1)
        return new_lp, -(logp_all.exp() * logp_all).sum(1).mean()


class DiagGaussian:
    """Continuous actions ``(B, k)`` float32 from means ``(B, k)`` and ``log_std`` ``(k,)``."""

    continuous = True

    def __init__(self, log_std: torch.Tensor) -> None:
        self.log_std = log_std

    def sample(
        self, mean: torch.Tensor, generator: torch.Generator, greedy: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(actions, log-probabilities)``; ``greedy`` takes the mean."""
        log_std = self.log_std.float()
        if greedy:
            noise = torch.zeros_like(mean)
        else:
            noise = torch.randn(mean.shape, generator=generator, device=mean.device)
        action = mean + log_std.exp() * noise
        logprob = (-0.5 * noise.square() - log_std - _HALF_LOG_2PI).sum(1)
        return action, logprob

    def log_prob(self, mean: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        log_std = self.log_std.float()
        z = (actions - mean.float()) * torch.exp(-log_std)
        return (-0.5 * z.square() - log_std - _HALF_LOG_2PI).sum(1)

    def log_prob_entropy(
        self, mean: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log pi(a|s) per row, entropy)`` in float32 (the entropy is the same for
        every row: the standard deviations do not depend on the state)."""
        entropy = (0.5 + _HALF_LOG_2PI + self.log_std.float()).sum()
        return self.log_prob(mean, actions), entropy
