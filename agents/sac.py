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
from rlamd.profiling import span
from rlamd.replay import Buffer, ReplayBatch

from .networks import GaussianActor
from .twin_critic import OffPolicySettings, TwinCritic, action_box, copy_precision, flat_size

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
    """Critic updates per actor and temperature update (SB3: 1; CleanRL: 2)."""
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

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.policy_frequency < 1:
            raise ValueError(f"policy_frequency={self.policy_frequency}; accepted: an integer >= 1")
        for name in ("lr", "ent_coef_init"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number > 0")
        if self.ent_coef is not None and not self.ent_coef >= 0:
            raise ValueError(f"ent_coef={self.ent_coef}; accepted: a number >= 0, or auto")
        if not self.log_std_min < self.log_std_max:
            raise ValueError(
                f"log_std_min={self.log_std_min}; accepted: a number below log_std_max="
                f"{self.log_std_max}"
            )


class SAC:
    """The SAC learner and its policy (inject the device and precision).

    Its steps are plain functions of tensors, the same on every device:

    * :meth:`act` -- sampled actions, uniformly random ones with probability
      ``random_share`` (1 before learning starts);
    * :meth:`learn_step` -- one whole update from a replay: sample, critic step, then
      (``update_actor``) actor and temperature steps, the Polyak blend of the target
      critics and the priority write; no host synchronisation;
    * :meth:`learn` -- :meth:`learn_step` plus the host bookkeeping (the update counter,
      which says whether the actor updates).

    Whoever builds the agent may capture ``act`` and ``learn_step`` as CUDA/HIP graphs
    from outside (:func:`rlamd.graphs.capture_methods`; ``update_actor`` True and False are
    two graphs). The CPU runs the very same functions.

    Args:
        cfg: settings.
        obs_shape: one observation's shape (vectors).
        action_size: the flat action width.
        device, precision: where, and the clamped mixed-precision helper.
        seed: seeds the agent's generators (acting, and the noise of the update).
        compile: unused by SAC (accepted as every agent takes it).
        capturable: optimizers a captured graph can step (GPUs only).
        low, high: the action box, flat (default ``[-1, 1]``).
    """

    def __init__(
        self,
        cfg: SACConfig,
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
        self.actor = GaussianActor(
            obs_size,
            action_size,
            cfg.hidden,
            low,
            high,
            log_std_min=cfg.log_std_min,
            log_std_max=cfg.log_std_max,
        ).to(device)
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
        self.actor_precision = copy_precision(precision)
        self.actor_optimizer = make_optimizer(
            self.actor_params, cfg.lr, cfg.adam_eps, device, capturable=capturable
        )
        self._temperature(cfg, action_size, capturable)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.learn_generator = torch.Generator(device=device)
        self.learn_generator.manual_seed(seed + 1)
        self.updates = 0
        self.sync = None
        """Gradient all-reduce (unused: SAC runs in one process)."""
        # [critic loss, mean Q, |TD|, actor loss, alpha, entropy, critic steps, actor steps]
        self._stats = torch.zeros(8, device=device)

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

    def learn(
        self, buffer: Buffer, batch_size: int, beta: float | torch.Tensor = 0.4
    ) -> torch.Tensor:
        """One update from ``buffer`` (:meth:`learn_step`), counted; the actor and the
        temperature update every ``policy_frequency`` updates.

        Returns |TD error| per sampled row (from a captured step: a buffer the next step
        overwrites).
        """
        update_actor = self.updates % self.cfg.policy_frequency == 0
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
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "actor_precision": self.actor_precision.state_dict(),
            "log_alpha": self.log_alpha.detach().cpu(),
            "alpha_optimizer": (
                None if self.alpha_optimizer is None else self.alpha_optimizer.state_dict()
            ),
            "generator": self.generator.get_state(),
            "learn_generator": self.learn_generator.get_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore in place (networks, optimizer moments, temperature, generators), so
        that steps captured before keep reading the right tensors."""
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        load_optimizer_state(self.actor_optimizer, state["actor_optimizer"])
        self.actor_precision.load_state_dict(state["actor_precision"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        if self.alpha_optimizer is not None and state.get("alpha_optimizer") is not None:
            load_optimizer_state(self.alpha_optimizer, state["alpha_optimizer"])
        self.generator.set_state(state["generator"])
        self.learn_generator.set_state(state["learn_generator"])
        self.updates = int(state["updates"])
