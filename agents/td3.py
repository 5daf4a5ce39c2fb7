"""Twin Delayed DDPG (TD3) for ``Box`` actions.

Paper: Fujimoto, van Hoof and Meger 2018, "Addressing Function Approximation Error in
Actor-Critic Methods" (https://arxiv.org/abs/1802.09477): clipped double Q-learning,
delayed policy and target updates, and target policy smoothing.

For a batch ``(s, a, G, s', g)`` with weights ``w``, the critics regress on
(:mod:`rlamd.agents.twin_critic`)

.. math:: y = G + g \\min_i Q_{\\bar\\theta_i}(s', \\mathrm{clip}(\\mu_{\\bar\\phi}(s') +
          \\mathrm{clip}(\\epsilon, -c, c), a_{low}, a_{high})),\\quad
          \\epsilon \\sim N(0, \\sigma^2)

with noise and clip in units of the box's half-widths; every ``policy_frequency``
updates the actor maximises ``Q_1(s, mu(s))`` and both targets take a Polyak step.
Acting adds ``N(0, exploration_noise^2)`` (half-widths) and clips to the box.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from rlamd.replay import ReplayBatch

from .networks import DeterministicActor
from .twin_critic import OffPolicySettings, TwinCriticAgent

__all__ = ["TD3", "TD3Config"]


@dataclass(frozen=True)
class TD3Config(OffPolicySettings):
    """TD3 settings: SB3's defaults (RL Zoo's MuJoCo entries), see
    :class:`~rlamd.agents.twin_critic.OffPolicySettings` for the replay's."""

    lr: float = 1e-3
    """Adam learning rate of the actor and the critics (SB3's TD3, the RL Zoo)."""
    hidden: tuple[int, ...] = (400, 300)
    """MLP widths of the actor and of each critic (Fujimoto et al. 2018, SB3)."""
    policy_frequency: int = 2
    """Critic updates per actor and target update (Fujimoto et al. 2018: 2)."""
    exploration_noise: float = 0.1
    """Std of the Gaussian acting noise, in half-widths of the box (RL Zoo: 0.1)."""
    policy_noise: float = 0.2
    """Std of the target policy smoothing noise, in half-widths (Fujimoto et al. 2018)."""
    noise_clip: float = 0.5
    """Clip of the smoothing noise, in half-widths (Fujimoto et al. 2018)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.policy_frequency < 1:
            raise ValueError(f"policy_frequency={self.policy_frequency}; accepted: an integer >= 1")
        if not self.lr > 0:
            raise ValueError(f"lr={self.lr}; accepted: a number > 0")
        for name in ("exploration_noise", "policy_noise", "noise_clip"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number >= 0")


class TD3(TwinCriticAgent):
    """The TD3 learner and its policy: :class:`~rlamd.agents.twin_critic.TwinCriticAgent`
    with a deterministic actor and its target; the actor and the targets update every
    ``policy_frequency`` updates (Fujimoto et al. 2018's delay), after the first ones."""

    STATS = 6
    """[critic loss, mean Q, |TD|, actor loss, critic steps, actor steps]"""
    ACTOR_PHASE = 1
    CRITIC_LOSS_SCALE = 1.0
    """The sum of the two critics' mean squared errors, without SAC's 1/2 (SB3; Fujimoto
    et al.'s code)."""

    def _make_actor(
        self, obs_size: int, low: torch.Tensor, high: torch.Tensor
    ) -> DeterministicActor:
        return DeterministicActor(obs_size, self.action_size, self.cfg.hidden, low, high)

    def _more(self, low: torch.Tensor, high: torch.Tensor, capturable: bool) -> None:
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self._actor_target_params = list(self.actor_target.parameters())
        self.low, self.high = low.to(self.device), high.to(self.device)

    # ------------------------------------------------------------------ acting
    def _clip(self, a: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(a, self.high), self.low)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, random_share: float | torch.Tensor = 0.0) -> torch.Tensor:
        """``mu(s)`` plus Gaussian noise, clipped to the box; each replaced by a uniformly
        random action with probability ``random_share``."""
        n, d = obs.shape[0], self.action_size
        scale = self.actor.bounds.scale
        with self.precision.autocast():
            mu = self.actor(obs).float()
        noise = torch.randn((n, d), generator=self.generator, device=self.device)
        action = self._clip(mu + noise * (self.cfg.exploration_noise * scale))
        uniform = torch.rand((n, d), generator=self.generator, device=self.device) * 2 - 1
        explore = torch.rand((n, 1), generator=self.generator, device=self.device) < random_share
        return torch.where(explore, self.actor.bounds(uniform), action)

    @torch.no_grad()
    def act_mean(self, obs: torch.Tensor) -> torch.Tensor:
        """``mu(s)``, no noise (evaluations)."""
        with self.precision.autocast():
            return self.actor(obs).float()

    # ------------------------------------------------------------------ learning
    def update_on(self, batch: ReplayBatch, update_actor: bool = True) -> torch.Tensor:
        """Critic step; with ``update_actor`` the actor step and both Polyak blends.
        Returns |TD error| per row."""
        cfg, scale = self.cfg, self.actor.bounds.scale
        with torch.no_grad():
            eps = torch.randn(
                batch.actions.shape, generator=self.learn_generator, device=self.device
            )
            eps = (eps * cfg.policy_noise).clamp(-cfg.noise_clip, cfg.noise_clip) * scale
            with self.precision.autocast():
                next_mu = self.actor_target(batch.next_obs).float()
            next_a = self._clip(next_mu + eps)
            target = batch.returns + batch.discounts * self.critic.min_target(
                batch.next_obs, next_a
            )
        weights = batch.weights / batch.weights.max()
        q_loss, q_mean, td_abs = self.critic.update(batch.obs, batch.actions, target, weights)
        one = torch.ones((), device=self.device)
        if update_actor:
            with self.critic.frozen(), self.precision.autocast():
                q1 = self.critic.q(batch.obs, self.actor(batch.obs), member=0)
            loss = -q1.float().mean()
            self.actor_precision.step(loss, self.actor_optimizer, self.actor_params)
            self.critic.blend(cfg.tau)
            with torch.no_grad():
                torch._foreach_lerp_(self._actor_target_params, self.actor_params, cfg.tau)
            actor = [loss.detach(), one]
        else:
            actor = [torch.zeros((), device=self.device)] * 2
        self._stats += torch.stack([q_loss, q_mean, td_abs.mean(), actor[0], one, actor[1]])
        return td_abs

    def read_metrics(self) -> dict[str, float]:
        """Means since the last read (one host sync; call once per log interval)."""
        q_loss, q, td, a_loss, n, n_actor = self._stats.tolist()
        self._stats.zero_()
        skipped = self.precision.skipped + self.actor_precision.skipped
        out = {"losses/skipped_updates": float(skipped.item())}
        if n:
            out.update(
                {"losses/qf_loss": q_loss / n, "losses/q_values": q / n, "losses/td_abs": td / n}
            )
        if n_actor:
            out["losses/actor_loss"] = a_loss / n_actor
        return out

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        return {**super().state_dict(), "actor_target": self.actor_target.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore in place, the actor's target too (see the base class)."""
        super().load_state_dict(state)
        self.actor_target.load_state_dict(state["actor_target"])
