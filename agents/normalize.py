"""Observation normalisation and reward scaling for PPO.

Running moments use the parallel (Chan et al. 1979) update of a mean ``m``, variance ``v``
and count ``n`` with a batch of ``b`` rows of mean ``m_b`` and variance ``v_b``:

.. math::
    \\delta = m_b - m,\\quad n' = n + b,\\quad m' = m + \\delta \\tfrac{b}{n'},\\quad
    v' = \\big(v n + v_b b + \\delta^2 \\tfrac{n b}{n'}\\big) / n'

* :class:`RunningNorm` (an ``nn.Module`` inside the actor-critic, so its statistics travel
  with the weights: checkpoints, Ray workers, evaluation, ``rlamd.load``) maps an
  observation to :math:`\\mathrm{clip}((x - m) / \\sqrt{v + 10^{-8}}, \\pm c)`. The agent
  updates it after each learning pass from the rollout it learned on, so acting and
  learning on one rollout see the same function.
* :class:`ReturnScaler` (on the host, per env) divides each reward by the running standard
  deviation of a discounted return :math:`G \\leftarrow \\gamma G + r`, restarted at every
  episode end, then clips to :math:`\\pm c`: gymnasium's ``NormalizeReward`` and
  ``TransformReward`` as CleanRL's ppo_continuous_action applies them (gymnasium restarts
  the return at terminations only).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["EPS", "ReturnScaler", "RunningNorm", "merge_moments"]

EPS = 1e-8
"""Added to variances under the square root (gymnasium's wrappers use the same)."""


def merge_moments(mean, var, count, batch_mean, batch_var, batch_count):
    """The parallel update in the module docstring; works on numpy arrays and tensors."""
    delta = batch_mean - mean
    total = count + batch_count
    new_mean = mean + delta * (batch_count / total)
    m2 = var * count + batch_var * batch_count + delta * delta * (count * batch_count / total)
    return new_mean, m2 / total, total


class RunningNorm(nn.Module):
    """Running mean and variance of observations, and the normalisation they define.

    Args:
        shape: one observation's shape.
        clip: normalised values are clipped to ``[-clip, clip]``.
    """

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0) -> None:
        super().__init__()
        self.clip = clip
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        # float32 copies of -mean and 1/std that forward reads (updated in place, so a
        # captured act keeps reading the right memory)
        self.register_buffer("shift", torch.zeros(shape))
        self.register_buffer("scale", torch.ones(shape))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return ((obs.float() + self.shift) * self.scale).clamp(-self.clip, self.clip)

    @torch.no_grad()
    def update(self, batch_mean: torch.Tensor, batch_var: torch.Tensor, batch_count: int) -> None:
        """Merge a batch's moments (float64 tensors of one observation's shape)."""
        mean, var, count = merge_moments(
            self.mean, self.var, self.count, batch_mean, batch_var, float(batch_count)
        )
        self.mean.copy_(mean)
        self.var.copy_(var)
        self.count.copy_(count)
        self.shift.copy_(-mean)
        self.scale.copy_(torch.rsqrt(var + EPS))

    @staticmethod
    def moments(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and (population) variance of ``rows`` ``(B, *shape)``, in float64."""
        x = rows.double()
        return x.mean(0), x.var(0, unbiased=False)


class ReturnScaler:
    """Scales one vector env's rewards by the running std of discounted returns (host).

    Args:
        num_envs: envs stepped together.
        gamma: the discount of the return whose spread is measured.
        clip: scaled rewards are clipped to ``[-clip, clip]``.
    """

    def __init__(self, num_envs: int, gamma: float, clip: float = 10.0) -> None:
        self.gamma, self.clip = gamma, clip
        self.ret = np.zeros(num_envs, dtype=np.float64)
        self.mean, self.var, self.count = 0.0, 1.0, 0.0

    def __call__(self, reward: np.ndarray, ended: np.ndarray) -> np.ndarray:
        """Scaled float32 rewards; ``ended`` marks the envs whose episode ended at this step."""
        self.ret = self.ret * self.gamma + reward
        self.mean, self.var, self.count = merge_moments(
            self.mean, self.var, self.count, self.ret.mean(), self.ret.var(), self.ret.size
        )
        self.ret[ended] = 0.0
        scaled = reward / np.sqrt(self.var + EPS)
        return np.clip(scaled, -self.clip, self.clip).astype(np.float32)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {
            "ret": torch.from_numpy(self.ret.copy()),
            "moments": torch.tensor([self.mean, self.var, self.count], dtype=torch.float64),
        }

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        ret = state["ret"].numpy()
        if ret.shape == self.ret.shape:
            self.ret = ret.astype(np.float64).copy()
        self.mean, self.var, self.count = (float(v) for v in state["moments"])
