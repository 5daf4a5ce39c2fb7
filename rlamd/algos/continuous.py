"""What SAC and TD3 share as algorithms: the replay, the off-policy loop, the checks and the
capture site's shape; each of ``rlamd/algos/sac.py`` and ``td3.py`` makes one
:class:`ContinuousQAlgorithm` of its own agent, settings and presets.

Single process only: the off-policy loop (:class:`rlamd.loops.OffPolicyLoop`) on the replay
:func:`rlamd.algos.dqn_replay.build_replay` sizes. ``--ray`` is refused in one line (the
Ape-X split DQN runs is not written for them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from rlamd.config.errors import bad_setting
from rlamd.config.layout import envs_per_learner, where_envs
from rlamd.envs import VecEnv
from rlamd.graphs import capture_methods
from rlamd.loops import OffPolicyLoop
from rlamd.replay.storage import min_records_per_stream, unsampleable_per_stream

from .base import Policy, build_learner
from .dqn_replay import build_replay

if TYPE_CHECKING:
    from rlamd.collector import Collector
    from rlamd.config.sections import RunConfig

__all__ = ["ContinuousQAlgorithm", "capture_continuous", "continuous_checks"]


def _box_actions(cfg: Any) -> None:
    """The env's actions are a ``Box`` and its observations vectors (MLP critics)."""
    from rlamd.algos import which
    from rlamd.envs import parse_env_id, probe_env

    name = cfg.train.algo
    env_family = parse_env_id(cfg.train.env, cfg.train.env_module).family
    probe = probe_env(cfg.train.env, cfg.train.env_module) if env_family == "gym" else None
    if probe is None or not probe.actions.continuous:
        space = "discrete actions" if probe is None else f"actions {probe.action_space}"
        images = probe.image if probe is not None else env_family == "atari"
        raise bad_setting(
            "train",
            "algo",
            name,
            f"{which('discrete', *('image',) * images)} for such envs",
            why=f"{cfg.train.env} has {space}; {name} needs Box (continuous) actions",
        )
    if probe.image:
        raise bad_setting(
            "train",
            "algo",
            name,
            f"{which('box', 'image')} for image observations",
            why=f"{name} takes vector observations and {cfg.train.env} has images",
        )
    bounds = np.concatenate([np.ravel(probe.actions.low), np.ravel(probe.actions.high)])
    if not np.isfinite(bounds).all():
        raise bad_setting(
            "train",
            "algo",
            name,
            "an env whose action Box has finite low and high (the range its actions really take)",
            why=f"{name} squashes its actions into the Box and {cfg.train.env} has "
            f"{probe.action_space}",
        )


def _one_process(cfg: Any) -> None:
    """No Ray: SAC and TD3 train in one process."""
    from rlamd.algos import which

    if cfg.ray.enabled:
        raise bad_setting(
            "ray",
            "enabled",
            True,
            f"false for {cfg.train.algo} (--ray trains {which(on_ray=True)})",
            why=f"{cfg.train.algo} runs in one process; its Ray split is not written",
        )


def _replay_holds_a_batch(cfg: Any) -> None:
    """Every env gets enough replay records, and a batch fits in what can be sampled."""
    name, s = cfg.train.algo, cfg.agent
    if s.buffer_size is None:
        return  # auto: sized to the free memory when the replay is built
    envs = envs_per_learner(cfg)
    per_env = s.buffer_size // envs
    minimum = min_records_per_stream(s.n_step, 1)
    if per_env < minimum:
        raise bad_setting(
            name,
            "buffer_size",
            s.buffer_size,
            f"an integer >= {envs * minimum}",
            why=f"{where_envs(cfg)} need {name}.n_step + 3 = {minimum} records each",
        )
    most = envs * (per_env - unsampleable_per_stream(s.n_step, 1))
    if s.batch_size > most:
        raise bad_setting(
            name,
            "batch_size",
            s.batch_size,
            f"an integer from 1 to {most:,}",
            why=f"{name}.buffer_size {s.buffer_size:,} over {where_envs(cfg)} holds at most "
            f"{most:,} sampleable transitions",
        )


def continuous_checks() -> dict[str, Callable[[Any], None]]:
    """The checks of a run's settings SAC and TD3 run, by name, in order."""
    return {
        "one_process": _one_process,
        "box_actions": _box_actions,
        "replay_holds_a_batch": _replay_holds_a_batch,
    }


def capture_continuous(agent: Any, mode: str, log=None) -> Any:
    """Where ``act`` and ``learn_step`` of a SAC or TD3 agent become CUDA/HIP graphs, where
    ``mode`` (``--graph``) captures on the agent's device (``learn_step`` with and without
    the actor update: two graphs); returns ``agent``."""
    return capture_methods(
        agent,
        agent.device,
        mode,
        log,
        act=[agent.generator],
        learn_step=lambda buffer, *_: [buffer.generator, agent.learn_generator],
    )


def continuous_presets(name: str) -> dict[str, dict[str, dict[str, Any]]]:
    """SAC's and TD3's run presets for ``Box`` tasks (MuJoCo's long runs: the RL Zoo's 1M
    steps, evaluated and checkpointed every 50k); the algorithm's own section keeps its
    config's defaults, which are its RL Zoo values (cited in its module)."""
    train = {
        "steps": 1_000_000,
        "num_envs": 1,
        "eval_every": 50_000,
        "checkpoint_every": 50_000,
        "log_every": 5_000,
        "eval_episodes": 10,
    }
    return {"continuous": {"train": train, name: {}}}


class ContinuousQAlgorithm:
    """An off-policy actor-critic for ``Box`` actions: SAC's and TD3's algorithm objects
    are subclasses that name their own parts (class attributes, as every algorithm's).
    """

    name: ClassVar[str]
    """The registry name and config section."""
    config: ClassVar[type]
    """Its settings dataclass (``SACConfig``, ``TD3Config``)."""
    agent_class: ClassVar[type]
    """The learner (``rlamd.agents.sac.SAC``, ``rlamd.agents.td3.TD3``)."""
    presets: ClassVar[dict[str, dict[str, dict[str, Any]]]]
    """Per env family, what differs from the defaults."""
    moved_keys: ClassVar[dict[str, str]] = {}
    """Nothing moved: new sections."""
    takes: ClassVar[frozenset[str]] = frozenset({"box"})
    on_ray: ClassVar[bool] = False

    def __init__(self) -> None:
        name = self.name
        self.fixed_on_resume = {
            f"{name}.hidden": "network",
            f"{name}.buffer_size": "replay",
            f"{name}.n_step": "replay",
            f"{name}.prioritized": "replay",
        }
        self.checks = continuous_checks()

    def capture(self, agent: Any, mode: str, log=None) -> Any:
        """The algorithm's capture site: its ``act`` and ``learn_step`` as graphs."""
        return capture_continuous(agent, mode, log)

    def check(self, cfg: RunConfig) -> None:
        for check in self.checks.values():
            check(cfg)

    def build_agent(self, cfg: RunConfig, device: torch.device, env: VecEnv, log=None) -> Any:
        """The agent on the env's action box, its steps captured where ``--graph`` says."""
        info = env.actions
        bounds = {"low": torch.from_numpy(info.low), "high": torch.from_numpy(info.high)}
        settings = getattr(cfg, self.name)
        agent = build_learner(self.agent_class, settings, cfg, device, env, info.size, **bounds)
        return self.capture(agent, cfg.train.graph, log)

    def policy(
        self,
        agent: Any,
        cfg: RunConfig,
        epsilon: float | None = None,
        deterministic: bool | None = None,
    ) -> Policy:
        """The mean action (evaluations, and ``deterministic``); ``deterministic=False``
        samples as training does, after learning starts. ``epsilon`` is the share of
        uniformly random actions, when given."""
        if deterministic is False or epsilon:
            share = float(epsilon or 0.0)
            return lambda obs: agent.act(obs, share)
        return agent.act_mean

    def local_loop(
        self, cfg: RunConfig, collector: Collector, agent: Any, start_step: int, log
    ) -> OffPolicyLoop:
        settings = getattr(cfg, self.name)
        replay = build_replay(
            settings,
            collector.env,
            agent.device,
            cfg.train.seed,
            log,
            setting=f"{self.name}.buffer_size",
        )
        return OffPolicyLoop(collector, replay, agent, settings, cfg.train.steps, start_step)

    def rollout_source(self, cfg: RunConfig, collector: Collector, agent: Any, index: int):
        raise NotImplementedError(f"{self.name} has no Ray rollout half (checks refuse --ray)")

    def learner_part(self, cfg: RunConfig, agent: Any, env: VecEnv, *args: Any):
        raise NotImplementedError(f"{self.name} has no Ray learner half (checks refuse --ray)")
