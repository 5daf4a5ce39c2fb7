"""What an algorithm is to the rest of rlamd: the seams, as Protocols.

An *algorithm* is one object that owns everything algorithm-specific about a run: its
presets, how its agent and policy are built, the loop a single process runs, what a Ray
rollout worker collects, what a Ray learner does with it, and which Ray driver schedules
them; its config section too (``config``, a frozen dataclass that becomes ``cfg.NAME``
when the algorithm is registered). The run loop, the engines, checkpoints and the CLI only
talk to these Protocols, so a new algorithm is its own module(s) plus
``rlamd.algos.register(...)``: one line in ``rlamd/algos/__init__.py``, or none for a
plugin, which registers itself (and, to run on Ray, a scheduling class registered with
:func:`rlamd.distributed.driver.register_driver`). See docs/ARCHITECTURE.md, Algorithms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import torch

from rlamd.device import describe_device
from rlamd.envs import Step, VecEnv
from rlamd.graphs import graphs_enabled
from rlamd.precision import Precision, resolve_precision

if TYPE_CHECKING:
    from rlamd.collector import Collector
    from rlamd.config.sections import RunConfig

__all__ = [
    "Agent",
    "Algorithm",
    "LearnerPart",
    "Loop",
    "Policy",
    "RolloutSource",
    "build_learner",
    "obs_info",
]

Policy = Callable[[torch.Tensor], torch.Tensor]
"""Observations on the device -> actions on the device."""


class Agent(Protocol):
    """What every agent offers (DQN and PPO in ``rlamd.agents``)."""

    precision: Any
    policy_net: torch.nn.Module
    updates: int
    sync: Any

    def read_metrics(self) -> dict[str, float]: ...
    def state_dict(self) -> dict: ...
    def load_state_dict(self, state: dict) -> None: ...


class Loop(Protocol):
    """A single-process training loop: collect, store, learn."""

    step: int
    learning_starts: int
    """Env steps before the first update (for the CPU forecast)."""

    def iterate(self) -> list[Step]:
        """One vector step (off-policy) or one rollout and its update (on-policy)."""
        ...

    def describe(self) -> str:
        """A few words for the log (replay size, rollout shape)."""
        ...

    def memory_bytes(self) -> float:
        """Bytes the loop's replay holds on its device (0 without one)."""
        ...

    def learning_sps(self, env_sps: float) -> float:
        """Expected env steps/s once learning runs, given the speed measured so far."""
        ...

    def metrics(self) -> dict[str, float]:
        """Schedules and agent metrics for the log (one host sync)."""
        ...

    def state_dict(self, include_replay: bool) -> dict:
        """What a checkpoint needs besides the agent (the replay, for instance)."""
        ...

    def load_state_dict(self, state: dict) -> list[str]:
        """Restore from a checkpoint; returns lines saying what was and wasn't restored."""
        ...


class RolloutSource(Protocol):
    """A Ray rollout worker's algorithm-specific half: turn env steps into a payload."""

    def collect(self, num_steps: int) -> tuple[Any, list[Step]]:
        """``(payload for a learner, the vector steps taken)``."""
        ...


class LearnerPart(Protocol):
    """A Ray learner's algorithm-specific half (the driver calls it through the learner)."""

    def feed(self, payload: Any, slot: int) -> int:
        """Take a worker's payload (``slot``: where its streams start); returns a size."""
        ...

    def step(self, *args: Any) -> None:
        """Learn (what ``args`` mean is agreed with the algorithm's driver)."""
        ...

    def describe(self) -> dict[str, Any]: ...
    def metrics(self) -> dict[str, float]: ...


class Algorithm(Protocol):
    """One training algorithm: presets, builders, local loop and Ray roles."""

    name: str
    """Registry name; also the name of its config section (``cfg.dqn`` / ``cfg.ppo``)."""
    config: type
    """Its config section: a frozen dataclass, a docstring under each field, whose
    defaults build it (``DQNConfig``); ``__post_init__`` checks its own fields."""
    moved_keys: dict[str, str]
    """Old ``section.key`` -> new ``section.key`` of settings that moved into its section
    (still read from old files, ``--set`` items and checkpoints, with a note)."""
    presets: dict[str, dict[str, dict[str, Any]]]
    """Env family -> {section: {key: value}}, what differs from the dataclass defaults."""
    fixed_on_resume: dict[str, str]
    """``section.key`` -> what it shapes (``network`` or ``replay``): settings a resumed
    run cannot change (``replay`` ones only where the checkpoint holds its replay)."""
    takes: frozenset[str]
    """What its policies take besides vector observations: ``"discrete"`` and ``"box"``
    actions, ``"image"`` observations. A refusal lists the registered algorithms that take
    what the env has (:func:`rlamd.algos.which`), so no algorithm names another."""
    on_ray: bool
    """It trains with ``--ray``: it has Ray halves and a driver registered with
    :func:`rlamd.distributed.host.register_driver`."""

    def check(self, cfg: RunConfig) -> None:
        """Refuse settings this algorithm cannot run with (``ConfigError``, one line);
        ``rlamd.config.checks.check_run`` calls it, so no check branches on the name."""
        ...

    def build_agent(
        self, cfg: RunConfig, device: torch.device, env: VecEnv, log: Any = None
    ) -> Agent:
        """The agent on ``device``; ``log`` hears why a graph capture failed, once."""
        ...

    def policy(
        self,
        agent: Any,
        cfg: RunConfig,
        epsilon: float | None = None,
        deterministic: bool | None = None,
    ) -> Policy:
        """An evaluation policy (``epsilon`` None: the configured evaluation epsilon;
        ``deterministic`` True: no exploration at all, False: the agent's exploring
        policy, None: what evaluations use)."""
        ...

    def local_loop(
        self, cfg: RunConfig, collector: Collector, agent: Any, start_step: int, log: Any
    ) -> Loop: ...

    def rollout_source(
        self, cfg: RunConfig, collector: Collector, agent: Any, index: int
    ) -> RolloutSource: ...

    def learner_part(
        self, cfg: RunConfig, agent: Any, env: VecEnv, rank: int, world: int, streams: int, log: Any
    ) -> LearnerPart | None: ...


def obs_info(env: VecEnv) -> tuple[tuple[int, ...], torch.dtype, int]:
    """``(observation shape, torch dtype, frames stacked)`` of one env observation."""
    space = env.single_observation_space
    shape = tuple(space.shape)
    dtype = torch.uint8 if str(space.dtype) == "uint8" else torch.float32
    return shape, dtype, env.frame_stack


def build_learner(
    kind: type,
    settings: Any,
    cfg: RunConfig,
    device: torch.device,
    env: VecEnv,
    num_actions: int | None = None,
    **extra: Any,
) -> Any:
    """``kind(settings, obs_shape, num_actions, device, precision, ...)`` for the run: the
    agents (DQN, PPO) take the same injected pieces (docs/ARCHITECTURE.md, Layers).

    ``num_actions`` defaults to the env's discrete actions; ``extra`` goes to ``kind`` as
    keywords (PPO: ``continuous``). The optimizer is made capturable when ``--graph``
    will capture the agent's steps, which the algorithm then wraps with
    :func:`rlamd.graphs.capture_methods`.
    """
    shape, dtype, _ = obs_info(env)
    cnn = dtype == torch.uint8 and len(shape) == 3
    bf16 = describe_device(device).bf16
    mode = resolve_precision(cfg.train.precision, device, bf16, mlp=not cnn)
    precision = Precision(
        mode, device, max_grad_norm=settings.max_grad_norm, grad_clamp=settings.grad_clamp
    )
    train = cfg.train
    return kind(
        settings,
        obs_info(env)[0],
        env.num_actions if num_actions is None else num_actions,
        device,
        precision,
        seed=train.seed,
        compile=train.compile,
        capturable=graphs_enabled(train.graph, device),
        **extra,
    )
