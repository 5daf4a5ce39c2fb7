"""PPO as an algorithm: presets, agent, the on-policy loop and its synchronous Ray roles.

Single process: :class:`rlamd.loops.OnPolicyLoop` (a rollout, then its update). On Ray,
each rollout worker runs :class:`RolloutRows` (one rollout with the current weights,
shipped as flat rows with GAE), each learner a :class:`RowsLearner` (its share of every
iteration's rows, gradients all-reduced), and
:class:`rlamd.distributed.ppo_sync.SyncPPODriver` schedules them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from rlamd.agents.ppo import PPO, PPOConfig, PPORows
from rlamd.config.errors import bad_setting
from rlamd.config.layout import (
    divisors,
    envs_per_learner,
    learners,
    split_over_learners,
    where_envs,
)
from rlamd.envs import Step, VecEnv
from rlamd.graphs import capture_methods
from rlamd.loops import OnPolicyLoop

from .base import Policy, build_learner

if TYPE_CHECKING:
    from rlamd.collector import Collector
    from rlamd.config.sections import RunConfig

__all__ = [
    "PPO_ALGORITHM",
    "PPOAlgorithm",
    "RolloutRows",
    "RowsLearner",
    "capture_ppo",
    "check_ppo",
]


class RolloutRows:
    """A rollout worker's PPO half: one rollout of ``ppo.num_steps``, as flat rows."""

    def __init__(self, cfg: RunConfig, collector: Collector, agent: PPO) -> None:
        self.agent, self.collector = agent, collector
        self.loop = OnPolicyLoop(collector, agent, cfg.ppo, cfg.train.steps)

    def collect(self, num_steps: int) -> tuple[PPORows, list[Step]]:
        steps = self.loop.collect()
        last = self.agent.value(self.collector.obs_tensor())
        return self.agent.flatten(self.loop.rollout, last), steps


class RowsLearner:
    """A learner's PPO half: an iteration on this learner's share of the workers' rows."""

    def __init__(self, agent: PPO) -> None:
        self.agent = agent
        self._rows: list[PPORows] = []

    def feed(self, payload: PPORows, slot: int) -> int:
        self._rows.append(payload)
        return len(self._rows)

    def step(self, progress: float) -> None:
        """Learn from the rows fed since the last step (anneals the learning rate first)."""
        rows, self._rows = self._rows, []
        self.agent.set_progress(progress)
        self.agent.learn(PPORows.cat(rows, self.agent.device))

    def describe(self) -> dict[str, Any]:
        return {"replay": 0}

    def metrics(self) -> dict[str, float]:
        return {}


def minibatches_split_evenly(cfg: Any) -> None:
    """PPO: one rollout (per learner) splits into ``num_minibatches`` equal, non-empty parts.

    A remainder would be dropped from every epoch, and a minibatch of one row has no
    standard deviation to normalise advantages with (``norm_adv``).
    """
    p, L = cfg.ppo, learners(cfg)
    rows = p.num_steps * envs_per_learner(cfg)
    smallest = 2 if p.norm_adv and L == 1 else 1
    if rows % p.num_minibatches == 0 and rows // p.num_minibatches >= smallest:
        return
    ok = divisors(rows, smallest)
    close = min(ok, key=lambda k: (abs(k - p.num_minibatches), -k)) if ok else None
    learner = " per learner" if L > 1 else ""
    raise bad_setting(
        "ppo",
        "num_minibatches",
        p.num_minibatches,
        f"a divisor of {rows} up to {max(ok) if ok else 1}",
        why=f"a rollout of ppo.num_steps={p.num_steps} x {where_envs(cfg)} = {rows} rows"
        f"{learner} does not split into {p.num_minibatches} equal minibatches of "
        f"{smallest} or more",
        close=str(close) if close is not None else None,
    )


def steps_cover_a_rollout(cfg: Any) -> None:
    """PPO: the run is at least one rollout long (it learns once per rollout)."""
    envs = (
        cfg.ray.num_rollout_workers * cfg.ray.envs_per_worker
        if cfg.ray.enabled
        else cfg.train.num_envs
    )
    rollout = cfg.ppo.num_steps * envs
    if cfg.train.steps < rollout:
        where = (
            f"{cfg.ray.num_rollout_workers} workers x {cfg.ray.envs_per_worker} envs"
            if cfg.ray.enabled
            else f"{envs} envs"
        )
        raise bad_setting(
            "train",
            "steps",
            cfg.train.steps,
            f"an integer >= {rollout}",
            why=f"less than one PPO rollout of ppo.num_steps={cfg.ppo.num_steps} x {where}",
        )


def workers_split_over_learners(cfg: Any) -> None:
    """Ray: each PPO learner takes the rollouts of an equal number of workers."""
    split_over_learners(
        cfg,
        "ray",
        "num_rollout_workers",
        "each PPO learner takes the rollouts of an equal number of workers",
    )


CHECKS: dict[str, Callable[[Any], None]] = {
    "workers_split_over_learners": workers_split_over_learners,
    "minibatches_split_evenly": minibatches_split_evenly,
    "steps_cover_a_rollout": steps_cover_a_rollout,
}
"""This algorithm's checks of a run's settings, by name, in the order they run."""


def check_ppo(cfg: Any) -> None:
    """What PPO needs of a run's settings (``rlamd.config.checks.check_run`` calls it):
    workers that split evenly over Ray learners, a rollout (per learner) that splits into
    equal minibatches, and a run at least one rollout long.

    Raises:
        ConfigError: the first setting that breaks a rule, in the one-line shape.
    """
    for check in CHECKS.values():
        check(cfg)


def capture_ppo(agent: PPO, mode: str, log=None) -> PPO:
    """The one site where PPO's steps (``act``, ``minibatch_step``) become CUDA/HIP
    graphs, where ``mode`` (``--graph``) captures on the agent's device; returns ``agent``."""
    return capture_methods(agent, agent.device, mode, log, act=[agent.generator], minibatch_step=())


class PPOAlgorithm:
    """PPO (``--algo ppo``): see :mod:`rlamd.agents.ppo` for the update."""

    name = "ppo"
    config = PPOConfig
    takes: ClassVar[frozenset[str]] = frozenset({"discrete", "box", "image"})
    on_ray: ClassVar[bool] = True
    moved_keys: ClassVar[dict[str, str]] = {}
    fixed_on_resume: ClassVar[dict[str, str]] = {"ppo.hidden": "network"}
    presets: ClassVar[dict[str, dict[str, dict[str, Any]]]] = {
        "classic": {
            "train": {
                "steps": 150_000,
                "num_envs": 4,
                "eval_every": 50_000,
                "checkpoint_every": 50_000,
                "log_every": 4_096,
                "eval_episodes": 10,
            },
            "ppo": {"clip_coef": 0.2, "ent_coef": 0.0, "lr": 1e-3},
        },
        # Box actions: CleanRL ppo_continuous_action's defaults (1M steps, 2048 steps per
        # rollout, 32 minibatches, 10 epochs, lr 3e-4, clip 0.2, no entropy bonus,
        # observations and rewards normalised and clipped to +-10), with 4 envs x 512
        # steps instead of 1 x 2048 (the same rollout; one env leaves the CPU idle).
        "continuous": {
            "train": {
                "steps": 1_000_000,
                "num_envs": 4,
                "eval_every": 100_000,
                "checkpoint_every": 100_000,
                "log_every": 10_000,
                "eval_episodes": 10,
            },
            "ppo": {
                "num_steps": 512,
                "num_minibatches": 32,
                "update_epochs": 10,
                "lr": 3e-4,
                "clip_coef": 0.2,
                "ent_coef": 0.0,
                "norm_obs": True,
                "norm_reward": True,
            },
        },
    }

    def check(self, cfg: RunConfig) -> None:
        check_ppo(cfg)

    def build_agent(self, cfg: RunConfig, device: torch.device, env: VecEnv, log=None) -> PPO:
        """The agent (a Gaussian policy for ``Box`` actions), its ``act`` and
        ``minibatch_step`` captured as graphs where ``--graph`` says so (eager elsewhere:
        the same functions)."""
        agent = build_learner(
            PPO, cfg.ppo, cfg, device, env, env.actions.size, continuous=env.continuous
        )
        return capture_ppo(agent, cfg.train.graph, log)

    def policy(
        self,
        agent: PPO,
        cfg: RunConfig,
        epsilon: float | None = None,
        deterministic: bool | None = None,
    ) -> Policy:
        """``deterministic`` None (evaluations): discrete actions sampled from the policy,
        continuous ones its mean (the deterministic policy RL Zoo's and SB3's evaluations
        use for such tasks); True: the most likely action; False: sampled."""
        if epsilon:
            raise bad_setting(
                "",
                "--epsilon",
                epsilon,
                "no --epsilon for a ppo run",
                why="ppo plays its policy's own actions, sampled or the mean, with no epsilon",
            )
        greedy = agent.dist.continuous if deterministic is None else deterministic
        return lambda obs: agent.act(obs, greedy)[0]

    def local_loop(
        self, cfg: RunConfig, collector: Collector, agent: PPO, start_step: int, log
    ) -> OnPolicyLoop:
        return OnPolicyLoop(collector, agent, cfg.ppo, cfg.train.steps, start_step)

    def rollout_source(
        self, cfg: RunConfig, collector: Collector, agent: PPO, index: int
    ) -> RolloutRows:
        return RolloutRows(cfg, collector, agent)

    def learner_part(
        self, cfg: RunConfig, agent: PPO, env: VecEnv, rank: int, world: int, streams: int, log
    ) -> RowsLearner:
        return RowsLearner(agent)


PPO_ALGORITHM = PPOAlgorithm()
