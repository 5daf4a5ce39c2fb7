"""PPO as an algorithm: presets, agent, the on-policy loop and its synchronous Ray roles.

Single process: :class:`rlamd.loops.OnPolicyLoop` (a rollout, then its update). On Ray,
each rollout worker runs :class:`RolloutRows` (one rollout with the current weights,
shipped as flat rows with GAE), each learner a :class:`RowsLearner` (its share of every
iteration's rows, gradients all-reduced), and
:class:`rlamd.distributed.ppo_sync.SyncPPODriver` schedules them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import torch

from rlamd.agents.ppo import PPO, PPORows
from rlamd.envs import Step, VecEnv
from rlamd.loops import OnPolicyLoop

from .base import Policy, build_learner

if TYPE_CHECKING:
    from rlamd.collector import Collector
    from rlamd.runconfig import RunConfig

__all__ = ["PPO_ALGORITHM", "PPOAlgorithm", "RolloutRows", "RowsLearner"]


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


class PPOAlgorithm:
    """PPO (``--algo ppo``): see :mod:`rlamd.agents.ppo` for the update."""

    name = "ppo"
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
    }

    def build_agent(self, cfg: RunConfig, device: torch.device, env: VecEnv, log=None) -> PPO:
        return build_learner(PPO, cfg.ppo, cfg, device, env, log)

    def policy(self, agent: PPO, cfg: RunConfig, epsilon: float | None = None) -> Policy:
        return lambda obs: agent.act(obs)[0]

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
