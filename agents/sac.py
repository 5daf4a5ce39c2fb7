"""Soft Actor-Critic for ``Box`` actions, with a learned entropy temperature.

Papers: Haarnoja et al. 2018, "Soft Actor-Critic: Off-Policy Maximum Entropy Deep
Reinforcement Learning with a Stochastic Actor" (https://arxiv.org/abs/1801.01290), and
Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications"
(https://arxiv.org/abs/1812.05905) for the temperature learned against a target entropy.

For a batch ``(s, a, G, s', g)`` with weights ``w`` and ``a' ~ pi(.|s')``, the critics
regress on (:mod:`rlamd.agents.twin_critic`)

.. math:: y = G + g \\, \\big(\\min_i Q_{\\bar\\theta_i}(s', a') - \\alpha \\log\\pi(a'|s')\\big)

then, every ``policy_frequency`` updates, the actor minimises
``E[alpha log pi(a~|s) - min_i Q_i(s, a~)]`` for reparameterised ``a~ ~ pi(.|s)``, and the
temperature ``alpha = exp(log alpha)`` minimises ``-log alpha (log pi(a~|s) + H_target)``
with ``H_target = -dim(A)`` unless set. Everything runs on the device; metrics are summed
there and read once per log interval (docs/ARCHITECTURE.md, rule 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlamd.precision import Precision, load_optimizer_state, make_optimizer
from rlamd.replay import ReplayBatch

from .networks import GaussianActor
from .twin_critic import OffPolicySettings, TwinCriticAgent

__all__ = ["SAC", "SACConfig"]


@dataclass(frozen=True)
class SACConfig(OffPolicySettings):
    """SAC settings: SB3's defaults (RL Zoo's MuJoCo entries), see
    :class:`~rlamd.agents.twin_critic.OffPolicySettings` for the replay's."""

    lr: float = 3e-4
    """Adam learning rate of the actor, the critics and the temperature (SB3)."""
    hidden: tuple[int, ...] = (256, 256)
    """MLP widths of the actor and of each critic (SB3, CleanRL)."""
    policy_frequency: int = 1
    """Critic updates per actor and temperature update (SB3: 1; CleanRL's 2 delays the actor
    but then takes 2 actor steps, one per critic step on average, which this does not)."""
    ent_coef: float | None = None
    """Entropy temperature alpha: none (or auto) learns it (Haarnoja et al. 2018b)."""
    ent_coef_init: float = 1.0
    """Initial temperature when it is learned (SB3's 'auto' starts at 1)."""
    target_entropy: float | None = None
    """Entropy the learned temperature aims at; none: -(action dimensions)."""
    log_std_min: float = -20.0
    """Lower clamp of the policy's log standard deviation (SB3)."""
    log_std_max: float = 2.0
    """Upper clamp of the policy's log standard deviation (SB3)."""
    squash_eps: float = 1e-6
    """The tanh's log-Jacobian is log(1 - tanh(u)^2 + squash_eps), as SB3 and CleanRL take
    it (their 1e-6); 0: the exact form, which keeps growing for saturated actions."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.policy_frequency < 1:
            raise ValueError(f"policy_frequency={self.policy_frequency}; accepted: an integer >= 1")
        for name in ("lr", "ent_coef_init"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number > 0")
        if self.ent_coef is not None and not self.ent_coef >= 0:
            raise ValueError(f"ent_coef={self.ent_coef}; accepted: a number >= 0, or auto")
        if not self.squash_eps >= 0:
            raise ValueError(f"squash_eps={self.squash_eps}; accepted: a number >= 0 (0: exact)")
        if not self.log_std_min < self.log_std_max:
            raise ValueError(
                f"log_std_min={self.log_std_min}; accepted: a number below log_std_max="
                f"{self.log_std_max}"
            )


class SAC(TwinCriticAgent):
    """The SAC learner and its policy: :class:`~rlamd.agents.twin_critic.TwinCriticAgent`
    with a squashed Gaussian actor and a learned (or fixed) entropy temperature; the
    actor and the temperature update every ``policy_frequency`` updates, from the first."""

    STATS = 8
    """[critic loss, mean Q, |TD|, actor loss, alpha, entropy, critic steps, actor steps]"""
    ACTOR_PHASE = 0

    def _make_actor(self, obs_size: int, low: torch.Tensor, high: torch.Tensor) -> GaussianActor:
        cfg = self.cfg
        return GaussianActor(
            obs_size,
            self.action_size,
            cfg.hidden,
            low,
            high,
            log_std_min=cfg.log_std_min,
            log_std_max=cfg.log_std_max,
            squash_eps=cfg.squash_eps,
        )

    def _more(self, low: torch.Tensor, high: torch.Tensor, capturable: bool) -> None:
        self._temperature(self.cfg, self.action_size, capturable)

    def _temperature(self, cfg: SACConfig, action_size: int, capturable: bool) -> None:
        """``log alpha``, learned (with its optimizer) unless ``ent_coef`` fixes it."""
        learned = cfg.ent_coef is None
        start = cfg.ent_coef_init if learned else max(cfg.ent_coef, 1e-30)
        device = self.device
        self.log_alpha = torch.tensor(float(start), device=device).log().requires_grad_(learned)
        self.alpha_precision = Precision("fp32", device, max_grad_norm=None, grad_clamp=None)
        self.alpha_optimizer = (
            make_optimizer([self.log_alpha], cfg.lr, cfg.adam_eps, device, capturable=capturable)
            if learned
            else None
        )
        self.target_entropy = (
            -float(action_size) if cfg.target_entropy is None else cfg.target_entropy
        )

    # ------------------------------------------------------------------ acting
    def _noise(self, shape: torch.Size, generator: torch.Generator) -> torch.Tensor:
        return torch.randn(shape, generator=generator, device=self.device)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, random_share: float | torch.Tensor = 0.0) -> torch.Tensor:
        """Actions sampled from the policy for a batch of observations, each replaced by a
        uniformly random one with probability ``random_share`` (a number or 0-d tensor)."""
        n, d = obs.shape[0], self.action_size
        with self.precision.autocast():
            action, _ = self.actor.sample(obs, self._noise((n, d), self.generator))
        b = self.actor.bounds
        uniform = torch.rand((n, d), generator=self.generator, device=self.device) * 2 - 1
        explore = torch.rand((n, 1), generator=self.generator, device=self.device) < random_share
        return torch.where(explore, b(uniform), action.float())

    @torch.no_grad()
    def act_mean(self, obs: torch.Tensor) -> torch.Tensor:
        """The mean action ``scale * tanh(mu(s)) + bias`` (evaluations)."""
        with self.precision.autocast():
            return self.actor.mean_action(obs).float()

    # ------------------------------------------------------------------ learning
    @property
    def alpha(self) -> torch.Tensor:
        """The temperature, a 0-d device tensor (no gradient)."""
        return self.log_alpha.detach().exp()

    def update_on(self, batch: ReplayBatch, update_actor: bool = True) -> torch.Tensor:
        """Critic step, then (``update_actor``) actor and temperature steps, then the
        Polyak blend; all on the device. Returns |TD error| per row."""
        alpha = self.alpha
        with torch.no_grad():
            noise = self._noise(batch.actions.shape, self.learn_generator)
            with self.precision.autocast():
                next_a, next_logp = self.actor.sample(batch.next_obs, noise)
            soft = self.critic.min_target(batch.next_obs, next_a) - alpha * next_logp.float()
            target = batch.returns + batch.discounts * soft
        wmax = batch.weights.max()
        weights = batch.weights / wmax
        q_loss, q_mean, td_abs = self.critic.update(batch.obs, batch.actions, target, weights)
        stats = [q_loss, q_mean, td_abs.mean()]
        if update_actor:
            stats += self._actor_step(batch.obs)
        else:
            zero = torch.zeros((), device=self.device)
            stats += [zero, alpha, zero, torch.ones((), device=self.device), zero]
        self.critic.blend(self.cfg.tau)
        self._stats += torch.stack(stats)
        return td_abs

    def _actor_step(self, obs: torch.Tensor) -> list[torch.Tensor]:
        """Actor and temperature steps; their metrics (and the step counts)."""
        noise = self._noise((obs.shape[0], self.action_size), self.learn_generator)
        alpha = self.alpha
        with self.critic.frozen(), self.precision.autocast():
            action, logp = self.actor.sample(obs, noise)
            q = self.critic.q(obs, action).amin(0)
        logp = logp.float()
        loss = (alpha * logp - q).mean()
        self.actor_precision.step(loss, self.actor_optimizer, self.actor_params)
        if self.alpha_optimizer is not None:
            alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
            self.alpha_precision.step(alpha_loss, self.alpha_optimizer, [self.log_alpha])
        one = torch.ones((), device=self.device)
        return [loss.detach(), alpha, -logp.detach().mean(), one, one]

    def read_metrics(self) -> dict[str, float]:
        """Means since the last read (one host sync; call once per log interval)."""
        q_loss, q, td, a_loss, alpha, ent, n, n_actor = self._stats.tolist()
        self._stats.zero_()
        skipped = self.precision.skipped + self.actor_precision.skipped
        out = {"losses/skipped_updates": float(skipped.item())}
        if n:
            out.update(
                {
                    "losses/qf_loss": q_loss / n,
                    "losses/q_values": q / n,
                    "losses/td_abs": td / n,
                    "losses/alpha": alpha / n,
                }
            )
        if n_actor:
            out.update({"losses/actor_loss": a_loss / n_actor, "losses/entropy": ent / n_actor})
        return out

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        return {
            **super().state_dict(),
            "log_alpha": self.log_alpha.detach().cpu(),
            "alpha_optimizer": (
                None if self.alpha_optimizer is None else self.alpha_optimizer.state_dict()
            ),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore in place, the temperature too (see the base class); a temperature that
        this run fixes (``ent_coef``) stays as set, so a resume that changes it applies."""
        super().load_state_dict(state)
        if self.alpha_optimizer is not None:
            with torch.no_grad():
                self.log_alpha.copy_(state["log_alpha"])
        if self.alpha_optimizer is not None and state.get("alpha_optimizer") is not None:
            load_optimizer_state(self.alpha_optimizer, state["alpha_optimizer"])
