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

GAE with episode ends inside the rollout, and the rollout storage itself, live in
:mod:`rlamd.agents.rollout`; the actor-critic network in :mod:`rlamd.agents.networks`;
the policy distributions (categorical logits, or for ``Box`` actions a diagonal Gaussian
with a learned state-independent log-std) in :mod:`rlamd.agents.distributions`; the
optional observation normalisation in :mod:`rlamd.agents.normalize`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlamd.precision import Precision, load_optimizer_state, make_optimizer, set_lr
from rlamd.seeding import stream_generator

from .distributions import Categorical, DiagGaussian
from .networks import ActorCritic
from .normalize import RunningNorm
from .rollout import PPORows, Rollout, compute_gae

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
    norm_obs: bool = False
    """Normalise vector observations by their running mean and std, clipped to +-norm_clip;
    the statistics live in the network (checkpoints, evaluation, rlamd.load)."""
    norm_reward: bool = False
    """Divide rewards by the running std of a discounted return, clipped to +-norm_clip
    (for learning only: scores stay real)."""
    norm_clip: float = 10.0
    """Clip of normalised observations and scaled rewards (CleanRL ppo_continuous_action: 10)."""
    log_std_init: float = 0.0
    """Continuous actions: the initial log standard deviation of the Gaussian policy."""

    def __post_init__(self) -> None:
        for name in ("num_steps", "num_minibatches", "update_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: an integer >= 1")
        for name in ("gamma", "gae_lambda"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number in [0, 1]")
        for name in ("lr", "clip_coef", "norm_clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number > 0")
        for name in ("vf_coef", "ent_coef"):  # a negative weight learns the reverse
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number >= 0")
        if self.target_kl is not None and self.target_kl <= 0:
            raise ValueError(f"target_kl={self.target_kl}; accepted: a number > 0 or none")


class PPO:
    """The PPO learner and its stochastic policy (inject the device and precision).

    Its steps are plain functions of tensors, the same on every device: :meth:`act`
    (actions, log-probabilities, values for a batch) and :meth:`minibatch_step` (one
    clamped update on the rows a permutation slice picks). :meth:`learn` runs the epochs
    over a rollout's rows and calls ``self.minibatch_step`` for each minibatch; whoever
    builds the agent may make ``act`` and ``minibatch_step`` CUDA/HIP graphs from
    outside (:func:`rlamd.graphs.capture_methods`), and the agent never knows.

    Args:
        cfg, obs_shape, device, precision, seed, compile, capturable: as for
            :class:`rlamd.agents.dqn.DQN`.
        num_actions: discrete actions, or with ``continuous`` the length of the flat
            action vector.
        continuous: a Gaussian policy over float actions (:class:`DiagGaussian`) instead
            of a categorical one.
    """

    def __init__(
        self,
        cfg: PPOConfig,
        obs_shape: tuple[int, ...],
        num_actions: int,
        device: torch.device,
        precision: Precision,
        *,
        seed: int = 0,
        compile: bool = False,
        capturable: bool = False,
        continuous: bool = False,
    ) -> None:
        self.cfg, self.device, self.precision = cfg, device, precision
        self.net = ActorCritic(
            obs_shape,
            num_actions,
            cfg.hidden,
            continuous=continuous,
            log_std_init=cfg.log_std_init,
            norm_obs=cfg.norm_obs,
            norm_clip=cfg.norm_clip,
        ).to(device)
        self.dist = DiagGaussian(self.net.log_std) if continuous else Categorical()
        """The policy's distribution over actions."""
        self.policy_net = self.net
        """The acting network (what Ray rollout actors copy)."""
        self._net_fn = torch.compile(self.net) if compile else self.net
        self.params = list(self.net.parameters())
        self.optimizer = make_optimizer(
            self.params, cfg.lr, cfg.adam_eps, device, capturable=capturable
        )
        self.generator = stream_generator(seed, "act", device)
        self.updates = 0
        self.sync = None
        """Set by a distributed learner (:class:`rlamd.distributed.GradSync`)."""
        # [policy loss, value loss, entropy, approx KL, clip fraction, grad norm, minibatches,
        #  explained var, rollouts]
        self._stats = torch.zeros(9, device=device)

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(
        self, obs: torch.Tensor, greedy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Actions, their log-probabilities and the values, for a batch, on the device
        (``greedy``: the most likely action, the mean of a Gaussian)."""
        with self.precision.autocast():
            head, value = self._net_fn(obs)
        action, logprob = self.dist.sample(head, self.generator, greedy)
        return action, logprob, value

    @torch.no_grad()
    def logprob(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """log pi(a|s) of given actions (for actions the env overrode)."""
        with self.precision.autocast():
            head, _ = self._net_fn(obs)
        return self.dist.log_prob(head, actions)

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        with self.precision.autocast():
            return self._net_fn(obs)[1]

    # ------------------------------------------------------------------ learning
    def set_progress(self, frac_done: float) -> None:
        """Anneal the learning rate linearly to 0 as the run progresses (in place where
        it is a device tensor that captured steps read)."""
        if self.cfg.anneal_lr:
            set_lr(self.optimizer, self.cfg.lr * max(0.0, 1.0 - frac_done))

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
        return PPORows(
            ro.obs.reshape(B, *ro.obs.shape[2:]),
            ro.actions.reshape(B, *ro.actions.shape[2:]),
            ro.logprobs.reshape(B),
            ro.values.reshape(B),
            adv.reshape(B),
            ret.reshape(B),
        )

    def learn(self, rows: PPORows) -> None:
        """``update_epochs`` passes of shuffled minibatches over ``rows`` (see :meth:`flatten`).

        Each epoch draws a permutation with the agent's generator and runs
        :meth:`minibatch_step` on each of its ``num_minibatches`` slices. With several
        learners (``self.sync`` set) each holds its share of the rows and takes the same
        share of every minibatch; the early stop on ``target_kl`` (one host read per
        epoch) is decided on the mean over all learners, so all of them run the same
        updates.
        """
        cfg = self.cfg
        B = rows.actions.shape[0]
        mb = B // cfg.num_minibatches
        if mb < 1:
            raise ValueError(
                f"{B} rows cannot make ppo.num_minibatches={cfg.num_minibatches} minibatches"
            )
        for _epoch in range(cfg.update_epochs):
            perm = torch.randperm(B, generator=self.generator, device=self.device)
            kl_sum = torch.zeros((), device=self.device)
            for start in range(0, mb * cfg.num_minibatches, mb):
                kl_sum += self.minibatch_step(rows, perm[start : start + mb])
                self.updates += 1
            if cfg.target_kl is not None:
                kl = kl_sum / cfg.num_minibatches
                if float(kl if self.sync is None else self.sync.mean(kl)) > cfg.target_kl:
                    break
        ret, old_v = rows.returns, rows.values
        var_y = ret.var()
        explained = torch.where(var_y > 0, 1 - (ret - old_v).var() / var_y, torch.zeros_like(var_y))
        self._stats[7] += explained
        self._stats[8] += 1
        if self.net.obs_norm is not None:
            self._observe(rows.obs)

    @torch.no_grad()
    def _observe(self, obs: torch.Tensor) -> None:
        """Merge the observations learned on into the running statistics (after the
        update, so a rollout is acted on and learned from with the same ones). With
        several learners, each holding an equal share of the rows, the moments are
        averaged over all of them, so every learner keeps the same statistics."""
        mean, var = RunningNorm.moments(obs)
        n = obs.shape[0]
        if self.sync is not None:
            mean, square = self.sync.mean(torch.stack([mean, var + mean.square()]))
            var = (square - mean.square()).clamp_min(0)
            n *= self.sync.world_size
        self.net.obs_norm.update(mean, var, n)

    def _normalise(self, adv: torch.Tensor) -> torch.Tensor:
        """Advantages scaled to mean 0 and (unbiased) std 1 over the whole minibatch,
        which with several learners spans all of their shares."""
        if self.sync is None:
            return (adv - adv.mean()) / (adv.std() + 1e-8)
        n = adv.numel() * self.sync.world_size
        mean, sq = self.sync.mean(torch.stack([adv.mean(), adv.square().mean()]))
        var = (sq - mean.square()).clamp_min(0) * (n / max(1, n - 1))
        return (adv - mean) / (var.sqrt() + 1e-8)

    def minibatch_step(self, rows: PPORows, idx: torch.Tensor) -> torch.Tensor:
        """One clamped update on ``rows[idx]`` (gathered on the device); returns the
        minibatch's approximate KL. The capturable step: device work only."""
        obs, actions, old_lp, old_v, adv, ret = (c.index_select(0, idx) for c in rows)
        cfg = self.cfg
        with self.precision.autocast():
            head, value = self._net_fn(obs)
        new_lp, entropy = self.dist.log_prob_entropy(head, actions)
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
        self._stats[:7] += torch.stack(
            [
                pg_loss.detach(),
                v_loss.detach(),
                entropy.detach(),
                approx_kl,
                clipfrac,
                self.precision.last_grad_norm.float(),
                torch.ones((), device=self.device),
            ]
        )
        return approx_kl

    def read_metrics(self) -> dict[str, float]:
        """Means since the last read (one host sync; call once per log interval)."""
        pg, vl, ent, kl, cf, gn, n, ev, rollouts = self._stats.tolist()
        self._stats.zero_()
        out = {
            "losses/skipped_updates": float(self.precision.skipped.item()),
            "charts/learning_rate": float(self.optimizer.param_groups[0]["lr"]),
        }
        if n:
            out.update(
                {
                    "losses/policy_loss": pg / n,
                    "losses/value_loss": vl / n,
                    "losses/entropy": ent / n,
                    "losses/approx_kl": kl / n,
                    "losses/clipfrac": cf / n,
                    "losses/grad_norm": gn / n,
                }
            )
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
        """Restore in place, so that steps captured before keep reading the right tensors."""
        self.net.load_state_dict(state["net"])
        load_optimizer_state(self.optimizer, state["optimizer"])
        self.precision.load_state_dict(state["precision"])
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])
