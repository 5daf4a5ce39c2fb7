"""What SAC and TD3 share: their replay and schedule settings, and the twin critics.

Both learn two Q-functions from the same replay with the clipped double-Q target of
Fujimoto et al. 2018 (https://arxiv.org/abs/1802.09477),

.. math:: y = G + g \\, \\big(\\min_i Q_{\\bar\\theta_i}(s', a') - c(s', a')\\big),\\qquad
          L = k \\sum_i \\tfrac1B \\sum_b w_b \\big(Q_{\\theta_i}(s_b, a_b) - y_b\\big)^2

with ``G`` the n-step return, ``g = gamma^m`` (0 at a termination), ``w`` the importance
weights of a prioritized replay (1 when uniform), ``c`` SAC's entropy term (0 for TD3)
and ``k`` SAC's 1/2 and TD3's 1, as SB3 writes them (Adam cancels the scale but for its
epsilon; with SB3's ``k`` each update equals SB3's to float rounding,
``tests/agents/test_sb3_parity.py``). The mean ``|Q_i - y|`` over the critics is the new
priority. Targets follow by a Polyak blend, ``theta_bar <- (1 - tau) theta_bar + tau theta``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch

from rlamd.precision import Precision, load_optimizer_state, make_optimizer
from rlamd.profiling import span
from rlamd.seeding import stream_generator

from .networks import TwinQ

__all__ = [
    "OffPolicySettings",
    "TwinCritic",
    "TwinCriticAgent",
    "action_box",
    "copy_precision",
    "flat_size",
]


def flat_size(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def action_box(
    size: int, low: torch.Tensor | None, high: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The flat float32 action bounds, ``[-1, 1]`` where none are given."""
    low = -torch.ones(size) if low is None else torch.as_tensor(low).float()
    high = torch.ones(size) if high is None else torch.as_tensor(high).float()
    return low, high


@dataclass(frozen=True)
class OffPolicySettings:
    """Replay and schedule settings of SAC and TD3 (their sections add their own).

    Defaults are Stable-Baselines3's (as the RL Zoo's MuJoCo entries use them), except
    ``learning_starts``, the RL Zoo's MuJoCo value.
    """

    buffer_size: int | None = 1_000_000
    """Replay capacity in transitions (SB3, CleanRL); None: what fits in memory."""
    batch_size: int = 256
    """Transitions per update (SB3, CleanRL)."""
    learning_starts: int = 10_000
    """Env steps of uniformly random actions before the first update (RL Zoo, MuJoCo)."""
    train_frequency: int = 1
    """Env steps per update (SB3: train_freq 1, gradient_steps 1)."""
    gamma: float = 0.99
    """Discount factor."""
    n_step: int = 1
    """Steps in the return before bootstrapping (1, as the papers)."""
    tau: float = 0.005
    """Polyak rate of the target networks (SB3, CleanRL)."""
    adam_eps: float = 1e-8
    """Adam epsilon (PyTorch's default)."""
    prioritized: bool = False
    """Prioritized replay (Schaul et al. 2016); False samples uniformly, as the papers."""
    alpha: float = 0.6
    """Priority exponent of a prioritized replay."""
    beta_start: float = 0.4
    """Importance-sampling exponent at the start, annealed to beta_end."""
    beta_end: float = 1.0
    """Importance-sampling exponent at the end of the run."""
    priority_eps: float = 1e-6
    """Added to |TD error| so no transition gets probability 0."""
    max_grad_norm: float | None = None
    """Global gradient-norm clip (none, as SB3's SAC and TD3)."""
    grad_clamp: float | None = None
    """Clamp every gradient entry to [-c, c] (none; guards fp16 outliers when set)."""

    def __post_init__(self) -> None:
        if self.buffer_size is not None and self.buffer_size < 1:
            raise ValueError(f"buffer_size={self.buffer_size}; accepted: an integer >= 1, or auto")
        for name in ("batch_size", "n_step", "train_frequency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: an integer >= 1")
        for name in ("gamma", "tau", "alpha", "beta_start", "beta_end"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number in [0, 1]")
        if self.tau == 0.0:
            raise ValueError("tau=0.0 would never update the targets; accepted: (0, 1]")
        for name in ("adam_eps", "priority_eps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number > 0")
        for name in ("max_grad_norm", "grad_clamp"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name}={value}; accepted: a number > 0, or none")

    def random_share(self, step: int) -> float:
        """Share of uniformly random actions at env step ``step``: 1 until
        ``learning_starts``, then 0 (the policy explores on its own)."""
        return 1.0 if step < self.learning_starts else 0.0

    def beta(self, step: int, total_steps: int) -> float:
        """Linear anneal from beta_start to beta_end over the whole run."""
        frac = min(1.0, step / max(1, total_steps))
        return self.beta_start + frac * (self.beta_end - self.beta_start)

    # The off-policy loop's schedule (rlamd.loops.OffPolicySchedule).
    def acting(self, step: int, total_steps: int) -> tuple[float, ...]:
        return (self.random_share(step),)

    def learning(self, step: int, total_steps: int) -> tuple[float, ...]:
        return (self.beta(step, total_steps),)

    def charts(self, step: int, total_steps: int) -> dict[str, float]:
        out = {"charts/random_actions": self.random_share(step)}
        if self.prioritized:
            out["charts/beta"] = self.beta(step, total_steps)
        return out


class TwinCritic:
    """Two Q-functions, their Polyak targets, their optimizer and its mixed precision.

    Args:
        obs_size, action_size: flat widths.
        hidden: MLP widths.
        lr, adam_eps: Adam's settings.
        device, precision: where, and the clamped mixed-precision helper.
        capturable: an optimizer a captured graph can step.
        loss_scale: ``k`` in the loss above.
    """

    def __init__(
        self,
        obs_size: int,
        action_size: int,
        hidden: tuple[int, ...],
        lr: float,
        adam_eps: float,
        device: torch.device,
        precision: Precision,
        *,
        capturable: bool = False,
        loss_scale: float = 0.5,
    ) -> None:
        self.loss_scale = loss_scale
        self.q = TwinQ(obs_size, action_size, hidden).to(device)
        self.target = copy.deepcopy(self.q).requires_grad_(False)
        self.params = list(self.q.parameters())
        self.target_params = list(self.target.parameters())
        self.precision = precision
        self.optimizer = make_optimizer(self.params, lr, adam_eps, device, capturable=capturable)

    def update(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        target: torch.Tensor,
        weights: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One clamped step on the weighted squared TD errors of both critics.

        Returns ``(loss, mean Q, |TD| per row averaged over the critics)`` (device tensors).
        """
        with self.precision.autocast():
            q = self.q(obs, actions)  # (2, B), float32
        td = q - target
        loss = self.loss_scale * (weights * td.pow(2)).mean(1).sum()
        self.precision.step(loss, self.optimizer, self.params)
        return loss.detach(), q.detach().mean(), td.detach().abs().mean(0)

    def min_target(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``min_i Q_bar_i(s, a)`` of the target critics (float32, no gradient)."""
        with torch.no_grad(), self.precision.autocast():
            return self.target(obs, actions).amin(0)

    @torch.no_grad()
    def blend(self, tau: float) -> None:
        """Polyak-blend the targets towards the critics (in place)."""
        torch._foreach_lerp_(self.target_params, self.params, tau)

    def frozen(self) -> _Frozen:
        """A context in which the critics' parameters take no gradient (the actor's loss
        flows through them; their own step comes from :meth:`update`)."""
        return _Frozen(self.params)

    def state_dict(self) -> dict:
        return {
            "q": self.q.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "precision": self.precision.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        """In place: steps captured before keep reading the same tensors."""
        self.q.load_state_dict(state["q"])
        self.target.load_state_dict(state["target"])
        load_optimizer_state(self.optimizer, state["optimizer"])
        self.precision.load_state_dict(state["precision"])


class _Frozen:
    def __init__(self, params: list[torch.nn.Parameter]) -> None:
        self.params = params

    def __enter__(self) -> None:
        for p in self.params:
            p.requires_grad_(False)

    def __exit__(self, *exc: object) -> None:
        for p in self.params:
            p.requires_grad_(True)


def copy_precision(p: Precision) -> Precision:
    """A helper of the same mode and limits with its own loss scale and counters (each
    optimizer gets one: an fp16 loss scale follows one loss)."""
    return Precision(p.mode, p.device, max_grad_norm=p.max_grad_norm, grad_clamp=p.grad_clamp)


class TwinCriticAgent:
    """What the SAC and TD3 learners share (inject the device and precision).

    Their steps are plain functions of tensors, the same on every device:

    * ``act`` -- actions for a batch of observations, uniformly random ones with
      probability ``random_share`` (1 before learning starts);
    * :meth:`learn_step` -- one whole update from a replay: sample, critic step, then
      (``update_actor``) the actor's own steps, the Polyak blends and the priority write;
      no host synchronisation;
    * :meth:`learn` -- :meth:`learn_step` plus the host bookkeeping (the update counter,
      which says whether the actor updates).

    Whoever builds the agent may capture ``act`` and ``learn_step`` as CUDA/HIP graphs from
    outside (:func:`rlamd.graphs.capture_methods`; ``update_actor`` True and False are two
    graphs). The CPU runs the very same functions. A subclass makes its actor
    (:meth:`_make_actor`), adds its own parts (:meth:`_more`) and its update (``update_on``).

    Args:
        cfg: settings.
        obs_shape: one observation's shape (vectors).
        action_size: the flat action width.
        device, precision: where, and the clamped mixed-precision helper.
        seed: the run seed; the agent's generators take its ``"act"`` and ``"learn"``
            streams (:func:`rlamd.seeding.stream_seed`).
        compile: unused (accepted as every agent takes it).
        capturable: optimizers a captured graph can step (GPUs only).
        low, high: the action box, flat (default ``[-1, 1]``).
    """

    STATS: int = 6
    """Width of the metric sums kept on the device."""
    ACTOR_PHASE: int = 0
    """The actor updates when ``(updates + ACTOR_PHASE) % policy_frequency == 0``."""
    CRITIC_LOSS_SCALE: float = 0.5
    """``k`` of the critics' loss (module docstring)."""

    def __init__(
        self,
        cfg,
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
        self.actor = self._make_actor(obs_size, low, high).to(device)
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
            loss_scale=self.CRITIC_LOSS_SCALE,
        )
        self.actor_params = list(self.actor.parameters())
        self.actor_precision = copy_precision(precision)
        self.actor_optimizer = make_optimizer(
            self.actor_params, cfg.lr, cfg.adam_eps, device, capturable=capturable
        )
        self._more(low, high, capturable)
        self.generator = stream_generator(seed, "act", device)
        self.learn_generator = stream_generator(seed, "learn", device)
        self.updates = 0
        self.sync = None
        """Gradient all-reduce (unused: SAC and TD3 run in one process)."""
        self._stats = torch.zeros(self.STATS, device=device)

    def _make_actor(self, obs_size: int, low: torch.Tensor, high: torch.Tensor):
        raise NotImplementedError

    def _more(self, low: torch.Tensor, high: torch.Tensor, capturable: bool) -> None:
        """The subclass's own parts, made after the shared ones (no random draws here)."""

    def update_on(self, batch, update_actor: bool = True) -> torch.Tensor:
        raise NotImplementedError

    def learn(self, buffer, batch_size: int, beta: float | torch.Tensor = 0.4) -> torch.Tensor:
        """One update from ``buffer`` (:meth:`learn_step`), counted; the actor updates every
        ``policy_frequency`` updates.

        Returns |TD error| per sampled row (from a captured step: a buffer the next step
        overwrites).
        """
        update_actor = (self.updates + self.ACTOR_PHASE) % self.cfg.policy_frequency == 0
        td_abs = self.learn_step(buffer, batch_size, beta, update_actor)
        self.updates += 1
        return td_abs

    def learn_step(
        self, buffer, batch_size: int, beta: float | torch.Tensor, update_actor: bool
    ) -> torch.Tensor:
        """Sample, update, blend, write priorities: the capturable step."""
        with span("sample"):
            batch = buffer.sample(batch_size, beta)
        with span("update"):
            td_abs = self.update_on(batch, update_actor)
        with span("priorities"):
            buffer.update_priorities(batch.indices, td_abs)
        return td_abs

    def state_dict(self) -> dict:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "actor_precision": self.actor_precision.state_dict(),
            "generator": self.generator.get_state(),
            "learn_generator": self.learn_generator.get_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore in place (networks, optimizer moments, generators), so that steps
        captured before keep reading the same tensors."""
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        load_optimizer_state(self.actor_optimizer, state["actor_optimizer"])
        self.actor_precision.load_state_dict(state["actor_precision"])
        self.generator.set_state(state["generator"])
        self.learn_generator.set_state(state["learn_generator"])
        self.updates = int(state["updates"])
