"""PPO: clipped surrogate, clipped value loss, GAE(lambda), rollouts on the device.

Schulman et al. 2017 (https://arxiv.org/abs/1707.06347), GAE: Schulman et al. 2016
(https://arxiv.org/abs/1506.02438); details as in Huang et al. 2022, "The 37
Implementation Details of PPO" (https://iclr-blog-track.github.io/2022/03/25/ppo-implementation-details/).

With ratio :math:`\\rho = \\pi_\\theta(a|s) / \\pi_{old}(a|s)` and normalised advantages
:math:`\\hat A`:

.. math::
    L = -\\mathbb{E}[\\min(\\rho \\hat A, \\mathrm{clip}(\\rho, 1-\\epsilon, 1+\\epsilon) \\hat A)]
        + c_v \\tfrac12 \\mathbb{E}[\\max((V - R)^2, (V_{old} + \\mathrm{clip}(V - V_{old}, \\pm\\epsilon) - R)^2)]
        - c_e \\mathbb{E}[H(\\pi_\\theta(\\cdot|s))]

GAE with episode ends inside the rollout: :math:`\\delta_t = r_t + \\gamma V'_t - V(s_t)`,
:math:`A_t = \\delta_t + \\gamma\\lambda (1 - e_t) A_{t+1}`, where :math:`e_t` marks an
episode end at t and :math:`V'_t` is 0 after a termination, :math:`V(\\text{final obs})`
after a truncation (bootstrapped), and :math:`V(s_{t+1})` otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from rlamd.precision import Precision

from .networks import fp32_head, is_image, make_torso

__all__ = ["PPO", "ActorCritic", "PPOConfig", "PPORows", "Rollout", "compute_gae"]


@dataclass(frozen=True)
class PPOConfig:
    """PPO settings; defaults are the common Atari ones (CleanRL ppo_atari, Huang et al. 2022)."""

    num_steps: int = 128
    """Env steps per env per rollout."""
    num_minibatches: int = 4
    """Minibatches per epoch."""
    update_epochs: int = 4
    """Passes over each rollout."""
    lr: float = 2.5e-4
    """Adam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run."""
    adam_eps: float = 1e-5
    """Adam epsilon (Huang et al. 2022)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_coef: float = 0.1
    """Surrogate (and value) clipping range."""
    clip_vloss: bool = True
    """Clip the value loss around the old values."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    grad_clamp: float = 5.0
    """Clamp every gradient entry to [-c, c] after clipping (guards fp16 outliers)."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    target_kl: float | None = None
    """Stop the epochs early when the approximate KL exceeds this (one host sync per epoch)."""
    hidden: tuple[int, ...] = (64, 64)
    """MLP sizes for vector observations (pixels use the Nature CNN)."""

    def __post_init__(self) -> None:
        for name in ("num_steps", "num_minibatches", "update_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: an integer >= 1")
        for name in ("gamma", "gae_lambda"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number in [0, 1]")
        if self.lr <= 0 or self.clip_coef <= 0:
            raise ValueError("lr and clip_coef must be > 0")
        if self.target_kl is not None and self.target_kl <= 0:
            raise ValueError(f"target_kl={self.target_kl}; accepted: a number > 0 or none")


def _orthogonal(layer: nn.Module, gain: float) -> None:
    if isinstance(layer, (nn.Linear, nn.Conv2d)):
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)


class ActorCritic(nn.Module):
    """Policy logits and a value, orthogonally initialised (Huang et al. 2022).

    Pixels: one shared Nature CNN under both heads (Mnih et al. 2016's A3C layout, as
    in CleanRL's ppo_atari). Vectors: separate tanh MLPs for the actor and the critic
    (CleanRL's ppo; Andrychowicz et al. 2021 found tanh and separate networks better on
    such tasks).
    """

    def __init__(self, obs_shape: tuple[int, ...], num_actions: int, hidden: tuple[int, ...] = (64, 64)) -> None:  # fmt: skip
        super().__init__()
        self.torso = make_torso(obs_shape, hidden, activation="tanh")
        self.critic_torso = (
            None if is_image(obs_shape) else make_torso(obs_shape, hidden, activation="tanh")
        )
        for torso in (self.torso, self.critic_torso):
            if torso is not None:
                torso.apply(lambda m: _orthogonal(m, math.sqrt(2)))
        self.policy = nn.Linear(self.torso.out_features, num_actions)
        self.value = nn.Linear(self.torso.out_features, 1)
        _orthogonal(self.policy, 0.01)
        _orthogonal(self.value, 1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.torso(obs)
        hv = h if self.critic_torso is None else self.critic_torso(obs)
        return fp32_head(self.policy, h), fp32_head(self.value, hv).squeeze(-1)


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
        next_values: V'_t, the value to bootstrap from after step t (see module docstring).
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

    Observations stay in their env dtype (uint8 for Atari) until the network.
    """

    def __init__(self, num_steps: int, num_envs: int, obs_shape: tuple[int, ...], obs_dtype: torch.dtype,
                 device: torch.device) -> None:  # fmt: skip
        T, N = num_steps, num_envs
        self.obs = torch.zeros((T, N, *obs_shape), dtype=obs_dtype, device=device)
        self.actions = torch.zeros((T, N), dtype=torch.long, device=device)
        self.logprobs = torch.zeros((T, N), device=device)
        self.values = torch.zeros((T, N), device=device)
        self.rewards = torch.zeros((T, N), device=device)
        self.terminated = torch.zeros((T, N), device=device)
        self.ended = torch.zeros((T, N), device=device)
        self.bootstrap = torch.zeros((T, N), device=device)  # V(final obs) where truncated
        self.num_steps, self.num_envs = T, N

    def next_values(self, last_value: torch.Tensor) -> torch.Tensor:
        """V'_t: V(s_{t+1}) inside an episode, V(final obs) after a truncation, 0 after a termination."""
        following = torch.cat([self.values[1:], last_value[None]], 0)
        after_end = self.bootstrap * (1.0 - self.terminated)
        return torch.where(self.ended > 0, after_end, following)


class PPO:
    """The PPO learner and its stochastic policy (inject the device and precision)."""

    def __init__(self, cfg: PPOConfig, obs_shape: tuple[int, ...], num_actions: int, device: torch.device,
                 precision: Precision, *, seed: int = 0, compile: bool = False) -> None:  # fmt: skip
        from rlamd.precision import make_optimizer

        self.cfg, self.device, self.precision = cfg, device, precision
        self.net = ActorCritic(obs_shape, num_actions, cfg.hidden).to(device)
        self.policy_net = self.net
        """The acting network (what Ray rollout actors copy)."""
        self._net_fn = torch.compile(self.net) if compile else self.net
        self.params = list(self.net.parameters())
        self.optimizer = make_optimizer(self.params, cfg.lr, cfg.adam_eps, device)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.updates = 0
        self.sync = None
        """Set by a distributed learner (:class:`rlamd.distributed.GradSync`)."""
        # [policy loss, value loss, entropy, approx KL, clip fraction, grad norm, minibatches, explained var, rollouts]
        self._stats = torch.zeros(9, device=device)

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(
        self, obs: torch.Tensor, greedy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Actions, their log-probabilities and the values, for a batch, on the device."""
        with self.precision.autocast():
            logits, value = self._net_fn(obs)
        if greedy:
            action = logits.argmax(1)
        else:  # Gumbel-max: a categorical draw with the agent's own generator
            u = torch.rand(logits.shape, generator=self.generator, device=self.device)
            action = (logits - torch.log(-torch.log(u.clamp_min(1e-20)))).argmax(1)
        logprob = torch.log_softmax(logits, 1).gather(1, action[:, None]).squeeze(1)
        return action, logprob, value

    @torch.no_grad()
    def logprob(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """log pi(a|s) of given actions (for actions the env overrode)."""
        with self.precision.autocast():
            logits, _ = self._net_fn(obs)
        return torch.log_softmax(logits, 1).gather(1, actions[:, None]).squeeze(1)

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        with self.precision.autocast():
            return self._net_fn(obs)[1]

    # ------------------------------------------------------------------ learning
    def set_progress(self, frac_done: float) -> None:
        """Anneal the learning rate linearly to 0 as the run progresses."""
        if self.cfg.anneal_lr:
            for group in self.optimizer.param_groups:
                group["lr"] = self.cfg.lr * max(0.0, 1.0 - frac_done)

    def update(self, ro: Rollout, last_value: torch.Tensor) -> None:
        """GAE on the rollout, then ``update_epochs`` passes of shuffled minibatches."""
        self.learn(self.flatten(ro, last_value))

    def flatten(self, ro: Rollout, last_value: torch.Tensor) -> PPORows:
        """The rollout as flat training rows, with GAE advantages and returns.

        This is what a Ray rollout actor ships to the learners; ``learn`` takes it (or
        several actors' rows concatenated).
        """
        cfg = self.cfg
        adv, ret = compute_gae(
            ro.rewards, ro.values, ro.ended, ro.next_values(last_value), cfg.gamma, cfg.gae_lambda
        )
        B = ro.num_steps * ro.num_envs
        return PPORows(ro.obs.reshape(B, *ro.obs.shape[2:]), ro.actions.reshape(B), ro.logprobs.reshape(B),
                       ro.values.reshape(B), adv.reshape(B), ret.reshape(B))  # fmt: skip

    def learn(self, rows: PPORows) -> None:
        """``update_epochs`` passes of shuffled minibatches over ``rows`` (see :meth:`flatten`).

        With several learners (``self.sync`` set) each holds its share of the rows and
        takes the same share of every minibatch; the early stop on ``target_kl`` is
        decided on the mean over all learners, so all of them run the same updates.
        """
        cfg = self.cfg
        obs, actions, old_lp, old_v, adv, ret = rows
        B = actions.shape[0]
        mb = B // cfg.num_minibatches
        if mb < 1:
            raise ValueError(
                f"{B} rows cannot make ppo.num_minibatches={cfg.num_minibatches} minibatches"
            )
        for _epoch in range(cfg.update_epochs):
            perm = torch.randperm(B, generator=self.generator, device=self.device)
            kl_sum = torch.zeros((), device=self.device)
            for start in range(0, mb * cfg.num_minibatches, mb):
                idx = perm[start : start + mb]
                kl_sum += self._minibatch(
                    obs[idx], actions[idx], old_lp[idx], old_v[idx], adv[idx], ret[idx]
                )
            if cfg.target_kl is not None:
                kl = kl_sum / cfg.num_minibatches
                if float(kl if self.sync is None else self.sync.mean(kl)) > cfg.target_kl:
                    break
        var_y = ret.var()
        explained = torch.where(var_y > 0, 1 - (ret - old_v).var() / var_y, torch.zeros_like(var_y))
        self._stats[7] += explained
        self._stats[8] += 1

    def _normalise(self, adv: torch.Tensor) -> torch.Tensor:
        """Advantages scaled to mean 0 and (unbiased) std 1 over the whole minibatch,
        which with several learners spans all of their shares."""
        if self.sync is None:
            return (adv - adv.mean()) / (adv.std() + 1e-8)
        n = adv.numel() * self.sync.world_size
        mean, sq = self.sync.mean(torch.stack([adv.mean(), adv.square().mean()]))
        var = (sq - mean.square()).clamp_min(0) * (n / max(1, n - 1))
        return (adv - mean) / (var.sqrt() + 1e-8)

    def _minibatch(self, obs, actions, old_lp, old_v, adv, ret) -> torch.Tensor:
        cfg = self.cfg
        with self.precision.autocast():
            logits, value = self._net_fn(obs)
        logp_all = torch.log_softmax(logits.float(), 1)
        new_lp = logp_all.gather(1, actions[:, None]).squeeze(1)
        # Entropy from log-probabilities directly: torch.distributions validates its
        # arguments with a host-synchronising check on every call.
        entropy = -(logp_all.exp() * logp_all).sum(1).mean()
        log_ratio = new_lp - old_lp
        ratio = log_ratio.exp()
        with torch.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean()
            clipfrac = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean()
        if cfg.norm_adv:
            adv = self._normalise(adv)
        pg_loss = torch.max(
            -adv * ratio, -adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)
        ).mean()
        if cfg.clip_vloss:
            clipped = old_v + (value - old_v).clamp(-cfg.clip_coef, cfg.clip_coef)
            v_loss = 0.5 * torch.max((value - ret) ** 2, (clipped - ret) ** 2).mean()
        else:
            v_loss = 0.5 * ((value - ret) ** 2).mean()
        loss = pg_loss - cfg.ent_coef * entropy + cfg.vf_coef * v_loss
        self.precision.step(loss, self.optimizer, self.params)
        self.updates += 1
        self._stats[:7] += torch.stack([pg_loss.detach(), v_loss.detach(), entropy.detach(), approx_kl, clipfrac,
                                        self.precision.last_grad_norm.float(), torch.ones((), device=self.device)])  # fmt: skip
        return approx_kl

    def read_metrics(self) -> dict[str, float]:
        """Means since the last read (one host sync; call once per log interval)."""
        pg, vl, ent, kl, cf, gn, n, ev, rollouts = self._stats.tolist()
        self._stats.zero_()
        out = {"losses/skipped_updates": float(self.precision.skipped.item()),
               "charts/learning_rate": self.optimizer.param_groups[0]["lr"]}  # fmt: skip
        if n:
            out.update({"losses/policy_loss": pg / n, "losses/value_loss": vl / n, "losses/entropy": ent / n,
                        "losses/approx_kl": kl / n, "losses/clipfrac": cf / n, "losses/grad_norm": gn / n})  # fmt: skip
        if rollouts:
            out["losses/explained_variance"] = ev / rollouts
        return out

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        return {
            "net": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "precision": self.precision.state_dict(),
            "generator": self.generator.get_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.precision.load_state_dict(state["precision"])
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])
