"""DQN as an algorithm: presets, agent, replay, the off-policy loop, its checks and Ray roles.

Single process: :class:`rlamd.loops.OffPolicyLoop` (collect -> replay -> updates), on the
replay :func:`rlamd.algos.dqn_replay.build_replay` sizes. On Ray, Ape-X's halves
(:mod:`rlamd.algos.dqn_apex`): each rollout worker runs an ``ApexSource``, each learner a
``ReplayShard``, and :class:`rlamd.distributed.apex.ApexDriver` schedules them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from rlamd.agents.dqn import DQN, DQNConfig
from rlamd.config.errors import bad_setting
from rlamd.config.layout import (
    envs_per_learner,
    family,
    frame_stack,
    learners,
    split_over_learners,
    where_envs,
)
from rlamd.envs import VecEnv
from rlamd.graphs import capture_methods
from rlamd.loops import OffPolicyLoop
from rlamd.replay.storage import min_records_per_stream, unsampleable_per_stream

from .base import Policy, build_learner
from .dqn_apex import ApexSource, ReplayShard
from .dqn_replay import build_replay

if TYPE_CHECKING:
    from rlamd.collector import Collector
    from rlamd.config.sections import RunConfig

__all__ = ["DQN_ALGORITHM", "DQNAlgorithm", "capture_dqn", "check_dqn"]


def replay_holds_a_batch(cfg: Any) -> None:
    """DQN: every env gets enough replay records, and a (per-learner) batch fits in it.

    The replay splits ``dqn.buffer_size`` evenly over the envs feeding it (on Ray, over
    the learners first); each env keeps ``n_step + frame_stack - 1`` of its records
    unsampleable (their n-step window or frame stack is incomplete), so at most
    ``envs * (per_env - (n_step + frame_stack - 1))`` transitions can ever be sampled,
    and a larger batch would never start learning.
    """
    if cfg.dqn.buffer_size is None:
        return  # auto: sized to the free memory when the replay is built
    d, L = cfg.dqn, learners(cfg)
    envs, stack = envs_per_learner(cfg), frame_stack(cfg)
    shard = d.buffer_size // L
    per_env = shard // envs
    minimum = min_records_per_stream(d.n_step, stack)
    if per_env < minimum:
        need = L * envs * minimum
        raise bad_setting(
            "dqn",
            "buffer_size",
            d.buffer_size,
            f"an integer >= {need}",
            why=f"{where_envs(cfg)} need dqn.n_step + frame_stack + 2 = {minimum} records each",
        )
    holdback = unsampleable_per_stream(d.n_step, stack)
    most = envs * (per_env - holdback)
    per_batch = d.batch_size // L
    if per_batch > most:
        shard_words = f"a shard of {shard:,}" if L > 1 else f"dqn.buffer_size {d.buffer_size:,}"
        each = (
            f"each of {L} learners samples dqn.batch_size / {L} = {per_batch:,} from "
            if L > 1
            else ""
        )
        raise bad_setting(
            "dqn",
            "batch_size",
            d.batch_size,
            f"an integer from 1 to {most * L:,}",
            why=f"{each}{shard_words} over {where_envs(cfg)}, less n_step + frame_stack - 1 = "
            f"{holdback} per env, holds at most {most:,} sampleable transitions",
        )


def batch_splits_over_learners(cfg: Any) -> None:
    """Ray: each learner takes an equal share of every batch."""
    split_over_learners(
        cfg, "dqn", "batch_size", "each learner takes an equal share of every batch"
    )


def discrete_actions(cfg: Any) -> None:
    """DQN: the env's actions are ``Discrete`` (Q-values rank a finite set of actions)."""
    if family(cfg) != "continuous":
        return
    from rlamd.algos import which
    from rlamd.envs import probe_env

    probe = probe_env(cfg.train.env, cfg.train.env_module)
    space, has = probe.action_space, ("box", "image") if probe.image else ("box",)
    raise bad_setting(
        "train",
        "algo",
        cfg.train.algo,
        f"{which(*has)} (their policies take Box actions{' and images' * probe.image})",
        why=f"{cfg.train.env} has continuous actions, {space}; DQN needs Discrete ones",
    )


def schedules_run_forward(cfg: Any) -> None:
    """Epsilon decays (``eps_end <= eps_start``; beta's rule is every replay's,
    :func:`rlamd.config.checks.beta_anneals_up`).

    The reverse is almost always two swapped values: exploration that grows over the run.
    """
    d = cfg.dqn
    if d.eps_end > d.eps_start:
        raise bad_setting(
            "dqn",
            "eps_end",
            d.eps_end,
            f"a number in [0, {d.eps_start}]",
            why=f"more than dqn.eps_start={d.eps_start}: exploration would grow",
        )


CHECKS: dict[str, Callable[[Any], None]] = {
    "schedules_run_forward": schedules_run_forward,
    "discrete_actions": discrete_actions,
    "batch_splits_over_learners": batch_splits_over_learners,
    "replay_holds_a_batch": replay_holds_a_batch,
}
"""This algorithm's checks of a run's settings, by name, in the order they run."""


def check_dqn(cfg: Any) -> None:
    """What DQN needs of a run's settings (``rlamd.config.checks.check_run`` calls it):
    discrete actions, a replay whose every env gets enough records and that holds a (per-learner) batch,
    and a batch that splits evenly over Ray learners.

    Raises:
        ConfigError: the first setting that breaks a rule, in the one-line shape.
    """
    for check in CHECKS.values():
        check(cfg)


def capture_dqn(agent: DQN, mode: str, log=None) -> DQN:
    """The one site where DQN's steps (``act``, ``learn_step``) become CUDA/HIP graphs,
    where ``mode`` (``--graph``) captures on the agent's device; returns ``agent``."""
    return capture_methods(
        agent,
        agent.device,
        mode,
        log,
        act=[agent.generator],
        learn_step=lambda buffer, *_: [buffer.generator],
    )


class DQNAlgorithm:
    """DQN (``--algo dqn``): see :mod:`rlamd.agents.dqn` for the update."""

    name = "dqn"
    config = DQNConfig
    takes: ClassVar[frozenset[str]] = frozenset({"discrete", "image"})
    on_ray: ClassVar[bool] = True
    moved_keys: ClassVar[dict[str, str]] = {
        f"ray.{key}": f"dqn.{key}"
        for key in ("chunk_steps", "ship_frames", "weights_every", "apex_epsilon", "apex_alpha")
    }
    """The Ape-X settings were ``[ray]`` ones; old files and checkpoints name them there."""
    fixed_on_resume: ClassVar[dict[str, str]] = {
        "dqn.hidden": "network",
        "dqn.dueling": "network",
        "dqn.buffer_size": "replay",
        "dqn.n_step": "replay",
        "dqn.prioritized": "replay",
    }
    presets: ClassVar[dict[str, dict[str, dict[str, Any]]]] = {
        "classic": {
            "train": {
                "steps": 60_000,
                "num_envs": 4,
                "eval_every": 20_000,
                "checkpoint_every": 20_000,
                "log_every": 2_000,
                "eval_episodes": 10,
            },
            "dqn": {
                "buffer_size": 50_000,
                "batch_size": 64,
                "lr": 1e-3,
                "learning_starts": 1_000,
                "train_frequency": 2,
                "target_update_interval": 250,
                "exploration_fraction": 0.2,
                "eps_end": 0.02,
                "eval_epsilon": 0.0,
                "n_step": 3,
                "alpha": 0.6,
            },
        },
    }

    def check(self, cfg: RunConfig) -> None:
        check_dqn(cfg)

    def build_agent(self, cfg: RunConfig, device: torch.device, env: VecEnv, log=None) -> DQN:
        """The agent, its ``act`` and ``learn_step`` captured as graphs where ``--graph``
        says so (eager elsewhere: the same functions)."""
        return capture_dqn(build_learner(DQN, cfg.dqn, cfg, device, env), cfg.train.graph, log)

    def policy(
        self,
        agent: DQN,
        cfg: RunConfig,
        epsilon: float | None = None,
        deterministic: bool | None = None,
    ) -> Policy:
        """Epsilon-greedy with ``epsilon`` (default ``dqn.eval_epsilon``); greedy when
        ``deterministic``."""
        eps = cfg.dqn.eval_epsilon if epsilon is None else epsilon
        eps = 0.0 if deterministic else eps
        return lambda obs: agent.act(obs, eps)

    def local_loop(
        self, cfg: RunConfig, collector: Collector, agent: DQN, start_step: int, log
    ) -> OffPolicyLoop:
        replay = build_replay(cfg.dqn, collector.env, agent.device, cfg.train.seed, log)
        return OffPolicyLoop(collector, replay, agent, cfg.dqn, cfg.train.steps, start_step)

    def rollout_source(
        self, cfg: RunConfig, collector: Collector, agent: DQN, index: int
    ) -> ApexSource:
        return ApexSource(cfg, collector, agent, index)

    def learner_part(
        self, cfg: RunConfig, agent: DQN, env: VecEnv, rank: int, world: int, streams: int, log
    ) -> ReplayShard:
        return ReplayShard(cfg, agent, env, rank, world, streams, log)


DQN_ALGORITHM = DQNAlgorithm()
