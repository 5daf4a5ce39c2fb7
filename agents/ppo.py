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
:mod:`rlamd.agents.rollout`; the actor-critic network in :mod:`rlamd.agents.networks`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlamd.graphs import GraphStep, resolve_graph_mode
from rlamd.precision import Precision, load_optimizer_state, set_lr

from .networks import ActorCritic
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

    def __post_init__(self) -> None:
        for name in ("num_steps", "num_minibatches", "update_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: an integer >= 1")
        for name in ("gamma", "gae_lambda"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number in [0, 1]")
        for name in ("lr", "clip_coef"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number > 0")
        if self.target_kl is not None and self.target_kl <= 0:
            raise ValueError(f"target_kl={self.target_kl}; accepted: a number > 0 or none")


class _StaticRows:
    """Device buffers a captured PPO minibatch step reads: the training rows, the epoch's
    permutation, the minibatch counter and the epoch's summed approximate KL."""

    def __init__(self, rows: PPORows, num_minibatches: int) -> None:
        self.columns: list[torch.Tensor] = list(rows)
        self._shapes = [(c.shape, c.dtype) for c in rows]
        self._owned: list[torch.Tensor] | None = None
        B = rows.actions.shape[0]
        self.rows, self.num_minibatches, self.mb = B, num_minibatches, B // num_minibatches
        device = rows.actions.device
        self.perm = torch.zeros(B, dtype=torch.long, device=device)
        self.counter = torch.zeros((), dtype=torch.long, device=device)
        self.kl_sum = torch.zeros((), device=device)

    def matches(self, rows: PPORows) -> bool:
        return self._shapes == [(c.shape, c.dtype) for c in rows]

    def load(self, rows: PPORows, static: bool) -> None:
        """Take ``rows``: copied into owned buffers when a captured step reads them
        (``static``), else only referenced (an eager step re-reads the columns each call)."""
        if not static:
            self.columns = list(rows)
            return
        if self._owned is None:
            self._owned = [torch.empty_like(c) for c in rows]
        self.columns = self._owned
        for dst, src in zip(self.columns, rows, strict=True):
            dst.copy_(src)


class PPO:
    """The PPO learner and its stochastic policy (inject the device and precision).

    With graphs on (``graph="auto"`` on a GPU) each minibatch update is one replay of a
    captured CUDA/HIP graph over static row buffers, and acting on N envs is one replay
    per env step; the learning rate lives in a device tensor (capturable Adam). On the
    CPU the same step functions run eagerly.

    Args:
        cfg, obs_shape, num_actions, device, precision, seed, compile: as for
            :class:`rlamd.agents.dqn.DQN`.
        graph: ``auto``, ``on`` or ``off`` (see :func:`rlamd.graphs.resolve_graph_mode`).
        log: where a failed capture reports why, once.
    """

    _MAX_ACT_GRAPHS = 4

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
        graph: str = "auto",
        log: Callable[[str], None] | None = None,
    ) -> None:
        from rlamd.precision import make_optimizer

        self.cfg, self.device, self.precision = cfg, device, precision
        self.graph_mode, self._log = graph, log
        self._capture = resolve_graph_mode(graph, device)
        self.net = ActorCritic(obs_shape, num_actions, cfg.hidden).to(device)
        self.policy_net = self.net
        """The acting network (what Ray rollout actors copy)."""
        self._net_fn = torch.compile(self.net) if compile else self.net
        self.params = list(self.net.parameters())
        self.optimizer = make_optimizer(
            self.params, cfg.lr, cfg.adam_eps, device, capturable=self._capture
        )
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.updates = 0
        self.sync = None
        """Set by a distributed learner (:class:`rlamd.distributed.GradSync`)."""
        # [policy loss, value loss, entropy, approx KL, clip fraction, grad norm, minibatches,
        #  explained var, rollouts]
        self._stats = torch.zeros(9, device=device)
        self._static: _StaticRows | None = None
        self._mb_step: GraphStep | None = None
        self._act_steps: dict[tuple, tuple[torch.Tensor, GraphStep]] = {}

    # ------------------------------------------------------------------ acting
    def act(
        self, obs: torch.Tensor, greedy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Actions, their log-probabilities and the values, for a batch, on the device.

        With graphs on, the results are buffers the next call with the same batch shape
        and ``greedy`` overwrites: use (or copy) them before acting again.
        """
        if not self._capture:
            return self._act_body(obs, greedy)
        key = (tuple(obs.shape), obs.dtype, greedy)
        entry = self._act_steps.get(key)
        if entry is None:
            if len(self._act_steps) >= self._MAX_ACT_GRAPHS:
                return self._act_body(obs, greedy)
            static = torch.empty_like(obs)
            step = GraphStep(
                lambda: self._act_body(static, greedy),
                self.device,
                mode=self.graph_mode,
                name=f"ppo act {tuple(obs.shape)}",
                generators=[self.generator],
                log=self._log,
            )
            entry = self._act_steps[key] = (static, step)
        static, step = entry
        static.copy_(obs)
        return step()

    @torch.no_grad()
    def _act_body(
        self, obs: torch.Tensor, greedy: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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
            ro.actions.reshape(B),
            ro.logprobs.reshape(B),
            ro.values.reshape(B),
            adv.reshape(B),
            ret.reshape(B),
        )

    def learn(self, rows: PPORows) -> None:
        """``update_epochs`` passes of shuffled minibatches over ``rows`` (see :meth:`flatten`).

        With several learners (``self.sync`` set) each holds its share of the rows and
        takes the same share of every minibatch; the early stop on ``target_kl`` is
        decided on the mean over all learners, so all of them run the same updates.
        Without, the minibatch update is a :class:`rlamd.graphs.GraphStep` (one graph
        replay per minibatch on a GPU); both ways draw the same permutations.
        """
        cfg = self.cfg
        obs, actions, old_lp, old_v, adv, ret = rows
        B = actions.shape[0]
        mb = B // cfg.num_minibatches
        if mb < 1:
            raise ValueError(
                f"{B} rows cannot make ppo.num_minibatches={cfg.num_minibatches} minibatches"
            )
        if self.sync is None:
            self._learn_static(rows)
        else:
            for _epoch in range(cfg.update_epochs):
                perm = torch.randperm(B, generator=self.generator, device=self.device)
                kl_sum = torch.zeros((), device=self.device)
                for start in range(0, mb * cfg.num_minibatches, mb):
                    idx = perm[start : start + mb]
                    kl_sum += self._minibatch(
                        obs[idx], actions[idx], old_lp[idx], old_v[idx], adv[idx], ret[idx]
                    )
                    self.updates += 1
                if cfg.target_kl is not None:
                    kl = kl_sum / cfg.num_minibatches
                    if float(self.sync.mean(kl)) > cfg.target_kl:
                        break
        var_y = ret.var()
        explained = torch.where(var_y > 0, 1 - (ret - old_v).var() / var_y, torch.zeros_like(var_y))
        self._stats[7] += explained
        self._stats[8] += 1

    def _learn_static(self, rows: PPORows) -> None:
        """The single-learner epochs over static buffers, one minibatch step at a time."""
        cfg = self.cfg
        st = self._static
        if st is None or not st.matches(rows):
            st = self._static = _StaticRows(rows, cfg.num_minibatches)
            self._mb_step = GraphStep(
                self._minibatch_step,
                self.device,
                mode=self.graph_mode,
                name="ppo minibatch",
                log=self._log,
            )
        assert self._mb_step is not None
        st.load(rows, static=self._mb_step.capture)
        for _epoch in range(cfg.update_epochs):
            torch.randperm(st.rows, generator=self.generator, device=self.device, out=st.perm)
            st.counter.zero_()
            st.kl_sum.zero_()
            for _ in range(cfg.num_minibatches):
                self._mb_step()
                self.updates += 1
            if cfg.target_kl is not None:  # one host sync per epoch, as documented
                if float(st.kl_sum / cfg.num_minibatches) > cfg.target_kl:
                    break

    def _minibatch_step(self) -> None:
        """The capturable minibatch update: rows ``perm[counter*mb : (counter+1)*mb]``
        gathered on the device (``index_select``, no host read of the counter)."""
        st = self._static
        assert st is not None
        idx = (
            st.perm[: st.num_minibatches * st.mb]
            .view(st.num_minibatches, st.mb)
            .index_select(0, st.counter.view(1))
            .view(-1)
        )
        cols = [c.index_select(0, idx) for c in st.columns]
        st.kl_sum += self._minibatch(*cols)
        st.counter += 1

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
        """One clamped update on a minibatch (device work only; callers count updates)."""
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
        self.net.load_state_dict(state["net"])
        load_optimizer_state(self.optimizer, state["optimizer"])
        self.precision.load_state_dict(state["precision"])
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])
        self._static, self._mb_step = None, None  # re-captured with the restored state
        self._act_steps.clear()
