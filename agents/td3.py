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

from rlamd.precision import Precision, load_optimizer_state, make_optimizer
from rlamd.profiling import span
from rlamd.replay import Buffer, ReplayBatch

from .networks import DeterministicActor
from .twin_critic import OffPolicySettings, TwinCritic, action_box, copy_precision, flat_size

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


class TD3:
    """The TD3 learner and its policy; the same steps and injection as
    :class:`rlamd.agents.sac.SAC` (``act``, ``learn_step`` with ``update_actor``, ``learn``).

    Args:
        cfg: settings.
        obs_shape: one observation's shape (vectors).
        action_size: the flat action width.
        device, precision: where, and the clamped mixed-precision helper.
        seed: seeds the agent's generators.
        compile: unused by TD3 (accepted as every agent takes it).
        capturable: optimizers a captured graph can step (GPUs only).
        low, high: the action box, flat (default ``[-1, 1]``).
    """

    def __init__(
        self,
        cfg: TD3Config,
        obs_shape: tuple[int, ...],
        action_size: int,
        device: torch.device,
        precision: Precision,
        *,
        seed: int = 0,
        compile: bool = False,
        capturable: bool = False,
        low: torch.Tensor | None = None,
        high: torch.Tensor | None = None,
    ) -> None:
        self.cfg, self.device, self.precision = cfg, device, precision
        self.action_size = action_size
        low, high = action_box(action_size, low, high)
        obs_size = flat_size(obs_shape)
        self.actor = DeterministicActor(obs_size, action_size, cfg.hidden, low, high).to(device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.policy_net = self.actor
        """The acting network."""
        self.critic = TwinCritic(
            obs_size,
            action_size,
            cfg.hidden,
            cfg.lr,
            cfg.adam_eps,
            device,
            precision,
            capturable=capturable,
        )
        self.actor_params = list(self.actor.parameters())
        self._actor_target_params = list(self.actor_target.parameters())
        self.actor_precision = copy_precision(precision)
        self.actor_optimizer = make_optimizer(
            self.actor_params, cfg.lr, cfg.adam_eps, device, capturable=capturable
        )
        self.low, self.high = low.to(device), high.to(device)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.learn_generator = torch.Generator(device=device)
        self.learn_generator.manual_seed(seed + 1)
        self.updates = 0
        self.sync = None
        """Gradient all-reduce (unused: TD3 runs in one process)."""
        # [critic loss, mean Q, |TD|, actor loss, critic steps, actor steps]
        self._stats = torch.zeros(6, device=device)

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
    def learn(
        self, buffer: Buffer, batch_size: int, beta: float | torch.Tensor = 0.4
    ) -> torch.Tensor:
        """One update (:meth:`learn_step`), counted; the actor and the targets update
        every ``policy_frequency`` updates (Fujimoto et al. 2018's delay)."""
        update_actor = (self.updates + 1) % self.cfg.policy_frequency == 0
        td_abs = self.learn_step(buffer, batch_size, beta, update_actor)
        self.updates += 1
        return td_abs

    def learn_step(
        self, buffer: Buffer, batch_size: int, beta: float | torch.Tensor, update_actor: bool
    ) -> torch.Tensor:
        """Sample, update, blend, write priorities: the capturable step."""
        with span("sample"):
            batch = buffer.sample(batch_size, beta)
        with span("update"):
            td_abs = self.update_on(batch, update_actor)
        with span("priorities"):
            buffer.update_priorities(batch.indices, td_abs)
        return td_abs

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
                q1 = self.critic.q(batch.obs, self.actor(batch.obs))[0]
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
        return {
            "actor": self.actor.state_dict(),
            "actor_target": self.actor_target.state_dict(),
            "critic": self.critic.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "actor_precision": self.actor_precision.state_dict(),
            "generator": self.generator.get_state(),
            "learn_generator": self.learn_generator.get_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore in place, so that steps captured before keep reading the same tensors."""
        self.actor.load_state_dict(state["actor"])
        self.actor_target.load_state_dict(state["actor_target"])
        self.critic.load_state_dict(state["critic"])
        load_optimizer_state(self.actor_optimizer, state["actor_optimizer"])
        self.actor_precision.load_state_dict(state["actor_precision"])
        self.generator.set_state(state["generator"])
        self.learn_generator.set_state(state["learn_generator"])
        self.updates = int(state["updates"])
