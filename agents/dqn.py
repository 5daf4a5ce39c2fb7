"""DQN with Double-Q, a dueling head, n-step returns and prioritized replay.

Papers: Mnih et al. 2015 (DQN, https://doi.org/10.1038/nature14236); van Hasselt et al.
2016 (Double DQN, https://arxiv.org/abs/1509.06461); Wang et al. 2016 (dueling,
https://arxiv.org/abs/1511.06581); Schaul et al. 2016 (prioritized replay,
https://arxiv.org/abs/1511.05952); Hessel et al. 2018 (Rainbow, n-step + the rest,
https://arxiv.org/abs/1710.02298).

Update for a batch of transitions ``(s, a, G, s', g)`` with n-step return ``G`` and
discount ``g = gamma^m`` (0 at a termination), importance weights ``w``:

.. math::
    a^* = \\arg\\max_{a'} Q_\\theta(s', a'),\\quad
    y = G + g \\, Q_{\\bar\\theta}(s', a^*),\\quad
    L = \\frac{1}{B}\\sum_i w_i \\, \\mathrm{Huber}(Q_\\theta(s_i, a_i) - y_i)

and ``|Q(s, a) - y|`` becomes the new priority. Everything runs on the device; the
metrics are accumulated there and read once per log interval (docs/ARCHITECTURE.md, rule 2).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from rlamd.precision import Precision, load_optimizer_state, make_optimizer
from rlamd.profiling import span
from rlamd.replay import ReplayBatch, ReplayBuffer
from rlamd.seeding import stream_generator

from .networks import QNetwork

__all__ = ["DQN", "DQNConfig"]


@dataclass(frozen=True)
class DQNConfig:
    """DQN settings. Defaults are for Atari; `rlamd.train` presets adjust them per env family."""

    buffer_size: int | None = 1_000_000
    """Replay capacity in transitions (Mnih et al. 2015; CleanRL dqn_atari); None: what fits in
    memory."""
    batch_size: int = 32
    """Transitions per update (Mnih et al. 2015)."""
    lr: float = 1e-4
    """Adam learning rate (CleanRL dqn_atari)."""
    adam_eps: float = 1e-8
    """Adam epsilon (PyTorch's default, as SB3 and CleanRL dqn_atari use it). Rainbow's 1.5e-4
    suits its distributional loss; with the Huber loss every gradient's RMS on Breakout is
    below 1e-4, and 1.5e-4 divided most of each step away (issue 27)."""
    gamma: float = 0.99
    """Discount factor."""
    n_step: int = 3
    """Steps in the return before bootstrapping (Hessel et al. 2018)."""
    learning_starts: int = 20_000
    """Env steps of random play before the first update (Hessel et al. 2018: 80K frames)."""
    train_frequency: int = 4
    """Env steps per update (Mnih et al. 2015: one update every 4 agent steps)."""
    target_update_interval: int = 250
    """Updates between target-network copies: 250 updates = 1,000 env steps at
    ``train_frequency`` 4 (CleanRL dqn_atari and the RL Zoo's Atari DQN: every 1,000 steps;
    Rainbow's 8,000 steps learned 3x slower in the first 250k steps, issue 27)."""
    tau: float = 1.0
    """Target update rate: 1.0 copies (hard update), < 1 blends every update (Polyak)."""
    eps_start: float = 1.0
    """Initial exploration epsilon."""
    eps_end: float = 0.01
    """Final exploration epsilon (CleanRL dqn_atari)."""
    exploration_fraction: float = 0.10
    """Fraction of the run over which epsilon decays linearly (CleanRL dqn_atari)."""
    eval_epsilon: float = 0.05
    """Epsilon when evaluating (Mnih et al. 2015)."""
    double_q: bool = True
    """Choose next actions with the online net, value them with the target (van Hasselt et al.
    2016)."""
    dueling: bool = True
    """Dueling value/advantage head (Wang et al. 2016)."""
    prioritized: bool = True
    """Prioritized replay (Schaul et al. 2016); False samples uniformly."""
    alpha: float = 0.5
    """Priority exponent (Hessel et al. 2018)."""
    beta_start: float = 0.4
    """Importance-sampling exponent at the start, annealed to beta_end (Schaul et al. 2016)."""
    beta_end: float = 1.0
    """Importance-sampling exponent at the end of the run."""
    priority_eps: float = 1e-6
    """Added to |TD error| so no transition gets probability 0."""
    max_grad_norm: float = 10.0
    """Global gradient-norm clip (Stable-Baselines3 DQN)."""
    grad_clamp: float = 5.0
    """Clamp every gradient entry to [-c, c] after clipping (guards fp16 outliers)."""
    hidden: tuple[int, ...] = (128, 128)
    """MLP sizes for vector observations (pixels use the Nature CNN)."""
    chunk_steps: int = 32
    """Ray (Ape-X): vector steps per chunk a rollout actor ships (chunk_steps x envs_per_worker transitions)."""
    ship_frames: bool = True
    """Ray (Ape-X): chunks carry each env's newest frame per step and learners rebuild the stacks (false: whole stacks, about 4x the bytes on Atari)."""
    weights_every: int = 100
    """Ray (Ape-X): learner updates between weight broadcasts to rollout workers (Ape-X: every 400 frames)."""
    apex_epsilon: float = 0.4
    """Ray (Ape-X): base of the epsilon spread, eps_i = base^(1 + alpha i/(N-1)) over all N envs (Horgan et al. 2018)."""
    apex_alpha: float = 7.0
    """Ray (Ape-X): exponent range of the epsilon spread."""

    def __post_init__(self) -> None:
        if self.buffer_size is not None and self.buffer_size < 1:
            raise ValueError(f"buffer_size={self.buffer_size}; accepted: an integer >= 1, or auto")
        positive = (
            "batch_size",
            "n_step",
            "train_frequency",
            "target_update_interval",
            "chunk_steps",
            "weights_every",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: an integer >= 1")
        for name in (
            "gamma",
            "tau",
            "eps_start",
            "eps_end",
            "exploration_fraction",
            "eval_epsilon",
            "alpha",
            "beta_start",
            "beta_end",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number in [0, 1]")
        if self.tau == 0.0:
            raise ValueError("tau=0.0 would never update the target; accepted: (0, 1]")
        for name in ("lr", "priority_eps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: a number > 0")
        if not 0.0 < self.apex_epsilon <= 1.0:
            raise ValueError(f"apex_epsilon={self.apex_epsilon}; accepted: a number in (0, 1]")
        if self.apex_alpha < 0:
            raise ValueError(f"apex_alpha={self.apex_alpha}; accepted: a number >= 0")
        if self.learning_starts < 0:
            raise ValueError(f"learning_starts={self.learning_starts}; accepted: an integer >= 0")

    def epsilon(self, step: int, total_steps: int) -> float:
        """Linear decay from eps_start to eps_end over exploration_fraction of the run."""
        span = max(1.0, self.exploration_fraction * total_steps)
        frac = min(1.0, step / span)
        return self.eps_start + frac * (self.eps_end - self.eps_start)

    def beta(self, step: int, total_steps: int) -> float:
        """Linear anneal from beta_start to beta_end over the whole run."""
        frac = min(1.0, step / max(1, total_steps))
        return self.beta_start + frac * (self.beta_end - self.beta_start)

    # The off-policy loop's schedule (rlamd.loops.OffPolicySchedule).
    def acting(self, step: int, total_steps: int) -> tuple[float, ...]:
        """``DQN.act``'s epsilon at ``step``."""
        return (self.epsilon(step, total_steps),)

    def learning(self, step: int, total_steps: int) -> tuple[float, ...]:
        """``DQN.learn``'s beta at ``step``."""
        return (self.beta(step, total_steps),)

    def charts(self, step: int, total_steps: int) -> dict[str, float]:
        out = {"charts/epsilon": self.epsilon(step, total_steps)}
        if self.prioritized:
            out["charts/beta"] = self.beta(step, total_steps)
        return out


class DQN:
    """The DQN learner and its epsilon-greedy policy (inject the device and precision).

    Its steps are plain functions of tensors, the same on every device:

    * :meth:`act` -- epsilon-greedy actions for a batch of observations;
    * :meth:`learn_step` -- one whole update from a replay: sample, n-step targets,
      forward/backward, clip/clamp/skip, optimizer step, Polyak blend (``tau < 1``) and
      the priority write; no host synchronisation and no Python branch on a device value;
    * :meth:`learn` -- :meth:`learn_step` plus the host bookkeeping: the update counter
      and, every ``target_update_interval`` updates, the hard target copy.

    Whoever builds the agent may make ``act`` and ``learn_step`` CUDA/HIP graphs from
    outside (:func:`rlamd.graphs.capture_methods`); the agent calls ``self.act`` and
    ``self.learn_step`` and never knows. The CPU runs the very same functions.

    Args:
        cfg: settings.
        obs_shape: one observation's shape (``(4, 84, 84)`` uint8 for Atari).
        num_actions: discrete actions.
        device: where the networks live.
        precision: the clamped mixed-precision helper.
        seed: the run seed; the agent's own generator (exploration) takes its ``"act"``
            stream (:func:`rlamd.seeding.stream_seed`), not the seed itself.
        compile: wrap the network in ``torch.compile``.
        capturable: build the optimizer so that its step can be captured in a graph
            (learning rate and step counters on the device; GPUs only).
    """

    def __init__(
        self,
        cfg: DQNConfig,
        obs_shape: tuple[int, ...],
        num_actions: int,
        device: torch.device,
        precision: Precision,
        *,
        seed: int = 0,
        compile: bool = False,
        capturable: bool = False,
    ) -> None:
        self.cfg, self.device, self.precision = cfg, device, precision
        self.num_actions = num_actions
        self.q = QNetwork(obs_shape, num_actions, dueling=cfg.dueling, hidden=cfg.hidden).to(device)
        self.target = copy.deepcopy(self.q).requires_grad_(False)
        self.policy_net = self.q
        """The acting network (what Ray rollout actors copy)."""
        self.params = list(self.q.parameters())
        self._target_params = list(self.target.parameters())
        self.optimizer = make_optimizer(
            self.params, cfg.lr, cfg.adam_eps, device, capturable=capturable
        )
        self._q_fn = torch.compile(self.q) if compile else self.q
        self._target_fn = torch.compile(self.target) if compile else self.target
        self.generator = stream_generator(seed, "act", device)
        self.updates = 0
        self.sync = None
        """Set by a distributed learner (:class:`rlamd.distributed.GradSync`): batch
        statistics and gradients are then taken over all learners' batches."""
        # [loss, mean Q, |TD|, grad norm, updates] summed since the last read.
        self._stats = torch.zeros(5, device=device)

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, obs: torch.Tensor, epsilon: float | torch.Tensor) -> torch.Tensor:
        """Epsilon-greedy actions for a batch of observations, on the device.

        ``epsilon``: a number, a 0-d tensor, or one per row (Ape-X's workers).
        """
        with self.precision.autocast():
            greedy = self._q_fn(obs).argmax(1)
        n = obs.shape[0]
        random = torch.randint(
            0, self.num_actions, (n,), generator=self.generator, device=self.device
        )
        explore = torch.rand(n, generator=self.generator, device=self.device) < epsilon
        return torch.where(explore, random, greedy)

    # ------------------------------------------------------------------ learning
    def learn(
        self, buffer: ReplayBuffer, batch_size: int, beta: float | torch.Tensor | None = None
    ) -> torch.Tensor:
        """One update from ``buffer`` (:meth:`learn_step`), counted; the target network
        is copied every ``target_update_interval`` updates (``tau == 1``).

        Args:
            buffer: any replay (uniform replay ignores ``beta`` and the priorities).
            batch_size: transitions per update.
            beta: importance-sampling exponent (None: ``cfg.beta_start``).

        Returns:
            |TD error| per sampled row (from a captured step: a buffer the next step
            overwrites).
        """
        td_abs = self.learn_step(buffer, batch_size, self.cfg.beta_start if beta is None else beta)
        self.updates += 1
        if self.cfg.tau >= 1.0 and self.updates % self.cfg.target_update_interval == 0:
            self.sync_target()
        return td_abs

    def learn_step(
        self, buffer: ReplayBuffer, batch_size: int, beta: float | torch.Tensor
    ) -> torch.Tensor:
        """Sample, update, blend (``tau < 1``), write priorities: the capturable step."""
        # Profiler ranges show in eager runs; a captured graph is one range (the caller's).
        with span("sample"):
            batch = buffer.sample(batch_size, beta)
        with span("update"):
            td_abs = self.update_on(batch)
            if self.cfg.tau < 1.0:
                with torch.no_grad():
                    torch._foreach_lerp_(self._target_params, self.params, self.cfg.tau)
        with span("priorities"):
            buffer.update_priorities(batch.indices, td_abs)
        return td_abs

    def update_on(self, batch: ReplayBatch) -> torch.Tensor:
        """Loss, clamped optimizer step and metrics on one batch, all on the device;
        returns |TD error| per row (the new priorities)."""
        with self.precision.autocast():
            q_all = self._q_fn(batch.obs)
            with torch.no_grad():
                next_target = self._target_fn(batch.next_obs).float()
                if self.cfg.double_q:
                    next_a = self._q_fn(batch.next_obs).argmax(1, keepdim=True)
                    next_q = next_target.gather(1, next_a).squeeze(1)
                else:
                    next_q = next_target.max(1).values
        q = q_all.float().gather(1, batch.actions[:, None]).squeeze(1)
        y = batch.returns + batch.discounts * next_q
        td = q - y
        # The buffer normalises weights by the largest *possible* weight (that of the
        # smallest priority stored), which in a big buffer can shrink every weight and
        # with it the step size tenfold; rescaling by the batch's largest weight keeps
        # the relative weighting and the learning rate meaningful (Dopamine, Rainbow).
        wmax = batch.weights.max()
        weights = batch.weights / (wmax if self.sync is None else self.sync.max(wmax))
        loss = (weights * F.smooth_l1_loss(q, y, reduction="none")).mean()
        self.precision.step(loss, self.optimizer, self.params)
        # A non-finite |TD| (NaN or inf from the env: the update was skipped) becomes the
        # smallest priority, so the row is seldom drawn again and the sum tree stays finite.
        td_abs = torch.nan_to_num(td.detach().abs(), nan=0.0, posinf=0.0)
        self._stats += torch.stack(
            [
                loss.detach(),
                q.detach().mean(),
                td_abs.mean(),
                self.precision.last_grad_norm.float(),
                torch.ones((), device=self.device),
            ]
        )
        return td_abs

    @torch.no_grad()
    def sync_target(self) -> None:
        """Copy the online network into the target network (in place: a captured step
        keeps reading the same target tensors)."""
        torch._foreach_copy_(self._target_params, self.params)

    def read_metrics(self) -> dict[str, float]:
        """Means since the last read (one host sync; call once per log interval)."""
        loss, q, td, gn, n = self._stats.tolist()
        self._stats.zero_()
        out = {"losses/skipped_updates": float(self.precision.skipped.item())}
        if n:
            out.update(
                {
                    "losses/td_loss": loss / n,
                    "losses/q_values": q / n,
                    "losses/td_abs": td / n,
                    "losses/grad_norm": gn / n,
                }
            )
        return out

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        return {
            "q": self.q.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "precision": self.precision.state_dict(),
            "generator": self.generator.get_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore in place (networks, optimizer moments, generator), so that steps
        captured before keep reading the right tensors."""
        self.q.load_state_dict(state["q"])
        self.target.load_state_dict(state["target"])
        load_optimizer_state(self.optimizer, state["optimizer"])
        self.precision.load_state_dict(state["precision"])
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])
