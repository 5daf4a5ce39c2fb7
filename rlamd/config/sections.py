"""The run's configuration: one frozen, typed :class:`RunConfig` of six sections.

``RunConfig.train`` (:class:`TrainConfig`) says what to train, for how long and where;
``dqn`` and ``ppo`` hold the algorithms' settings (``DQNConfig`` and ``PPOConfig``, beside
their agents), ``atari`` the Atari preprocessing (``AtariConfig``, beside the envs), ``env``
how any other gymnasium env is built (``EnvConfig``, beside the envs) and ``ray`` the
cluster layout (:class:`RayConfig`). Every section is a frozen dataclass with
a docstring under each field; the command line, TOML files and ``--set section.key=value``
all fill the same objects (:mod:`rlamd.config.layers` layers them). A ``RunConfig`` is
what every part of a run receives, Ray actors included, and what a checkpoint stores
(as plain dicts).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rlamd.agents.dqn import DQNConfig
from rlamd.agents.ppo import PPOConfig
from rlamd.device import parse_device_spec
from rlamd.envs import AtariConfig, EnvConfig, env_family, parse_env_id
from rlamd.graphs import GRAPH_MODES
from rlamd.precision import PRECISIONS

from .values import apply_overrides

__all__ = ["SECTION_TYPES", "RayConfig", "RunConfig", "TrainConfig"]


@dataclass(frozen=True)
class TrainConfig:
    """What to train, for how long, where, and how the run is logged and saved."""

    env: str = "breakout"
    """Environment: an ALE game (breakout, BreakoutNoFrameskip-v4, ALE/Breakout-v5), a
    classic-control task (cartpole, acrobot, mountaincar), any gymnasium id (Pendulum-v1)
    or a factory entry point (package.module:make_env)."""
    env_module: str | None = None
    """Modules (comma-separated) imported before the env is made, so that they can
    register gymnasium envs (--env-module)."""
    algo: str = "dqn"
    """Algorithm: dqn or ppo."""
    steps: int = 10_000_000
    """Total env steps (agent decisions summed over envs; 4 frames each on Atari)."""
    num_envs: int = 8
    """Environments stepped together."""
    device: str = "auto"
    """auto, cpu, cuda[:N], hip[:N] or rocm[:N] (hip/rocm map to torch's cuda on ROCm)."""
    precision: str = "auto"
    """auto, fp32, bf16 or fp16 (auto: bf16 where native, fp16 on other GPUs, else fp32)."""
    seed: int = 1
    """Seeds torch, the agent, the replay and the envs."""
    logdir: str = "runs"
    """Folder holding one sub-folder per run."""
    run_name: str | None = None
    """Run folder name (default: ENV_ALGO_sSEED_TIME)."""
    eval_every: int = 250_000
    """Env steps between evaluations of whole games (0: never)."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    checkpoint_every: int = 100_000
    """Env steps between checkpoints (one is also written on SIGINT/SIGTERM and at the end)."""
    checkpoint_minutes: float = 10.0
    """Also checkpoint after this many minutes without one, so a killed slow run loses
    little (0: by steps only)."""
    log_every: int = 10_000
    """Env steps between progress lines and TensorBoard points."""
    compile: bool = False
    """torch.compile the networks."""
    graph: str = "auto"
    """Capture the learner step as a CUDA/HIP graph: auto (on GPUs), on, or off."""
    tf32: bool = True
    """Let fp32 matmuls and convolutions use TF32 where the GPU has it (Ampere+, MI300)."""
    threads: int | None = None
    """CPU cores rlamd may use, split between envs, torch and numba (default: the affinity mask)."""
    profile: int = 0
    """Iterations to trace with torch.profiler once learning runs, into the run's profile/ (0: off)."""
    save_replay: bool = False
    """Put the replay contents in checkpoints (large: ~7 GB per 1M Atari transitions)."""
    tensorboard: bool = True
    """Write TensorBoard event files in the run folder."""

    def __post_init__(self) -> None:
        parse_env_id(self.env, self.env_module)
        parse_device_spec(self.device)
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r}; accepted: {', '.join(PRECISIONS)}")
        if self.graph not in GRAPH_MODES:
            raise ValueError(f"graph={self.graph!r}; accepted: {', '.join(GRAPH_MODES)}")
        for name in ("steps", "num_envs", "eval_episodes", "checkpoint_every", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: an integer >= 1")
        if self.checkpoint_minutes < 0:
            raise ValueError(
                f"checkpoint_minutes={self.checkpoint_minutes}; accepted: 0 (by steps only) or more"
            )
        if self.eval_every < 0:
            raise ValueError(f"eval_every={self.eval_every}; accepted: 0 (never) or more")
        if self.profile < 0:
            raise ValueError(f"profile={self.profile}; accepted: 0 (off) or a number of env steps")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads={self.threads}; accepted: an integer >= 1, or none")
        name = self.run_name
        if name and (name.strip(".") == "" or "/" in name or "\\" in name or "\0" in name):
            near = name.replace("/", "_").replace("\\", "_").replace("\0", "").strip(".")
            raise ValueError(
                f"run_name={name!r} (it names one folder inside train.logdir); accepted: a "
                f"folder name without / or \\, or none for ENV_ALGO_sSEED_TIME. Did you mean "
                f"{near or 'run'!r}?"
            )

    @property
    def family(self) -> str:
        """``atari``, ``classic``, ``continuous`` or ``pixels``: which preset the env takes
        (:func:`rlamd.envs.env_family`; an env that is not Atari is made once to tell)."""
        return env_family(self.env, self.env_module)


@dataclass(frozen=True)
class RayConfig:
    """How a ``--ray`` run is spread over a Ray cluster."""

    enabled: bool = False
    """Train on Ray: rollout actors feed one learner per GPU (--ray)."""
    address: str | None = None
    """Cluster to join: host:port, 'auto', or 'local' for a new one (default: RAY_ADDRESS or a running cluster, else a new local one)."""
    num_rollout_workers: int = 2
    """Rollout actors, each with its own vector env and policy copy on the CPU."""
    envs_per_worker: int = 4
    """Envs stepped together by each rollout actor."""
    num_learners: int = 1
    """Learner actors; more than one all-reduce their gradients every update."""
    gpus_per_learner: float | None = None
    """GPUs per learner, fractions allowed (default: 1 where the cluster has GPUs, else 0)."""
    cpus_per_worker: float = 1.0
    """CPUs reserved for each rollout actor."""
    cpus_per_learner: float = 1.0
    """CPUs reserved for each learner actor."""
    chunk_steps: int = 32
    """DQN: vector steps per chunk a rollout actor ships (chunk_steps x envs_per_worker transitions)."""
    ship_frames: bool = True
    """DQN: chunks carry each env's newest frame per step and learners rebuild the stacks (false: whole stacks, about 4x the bytes on Atari)."""
    weights_every: int = 100
    """DQN: learner updates between weight broadcasts to rollout workers (Ape-X: every 400 frames)."""
    apex_epsilon: float = 0.4
    """DQN: base of the Ape-X epsilon spread, eps_i = base^(1 + alpha i/(N-1)) over all N envs (Horgan et al. 2018)."""
    apex_alpha: float = 7.0
    """DQN: exponent range of the Ape-X epsilon spread."""
    max_worker_restarts: int = 20
    """Times Ray restarts each dead rollout actor (-1: always)."""
    max_failures: int = 0
    """Times the run restarts itself from its last checkpoint after a learner died (0: stop and say how to resume)."""
    placement_timeout_s: float = 60.0
    """Seconds to wait for the cluster to place every actor before giving up with a report."""
    group_timeout_s: float = 300.0
    """Seconds a learner waits on the others (process-group setup, each all-reduce)."""
    stall_timeout_s: float = 600.0
    """Seconds the driver waits for any rollout worker's data (restarts on other nodes included) before it stops the run with a report."""

    def __post_init__(self) -> None:
        for name in (
            "num_rollout_workers",
            "envs_per_worker",
            "num_learners",
            "chunk_steps",
            "weights_every",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"ray.{name}={getattr(self, name)}; accepted: an integer >= 1")
        for name in (
            "cpus_per_worker",
            "cpus_per_learner",
            "placement_timeout_s",
            "group_timeout_s",
            "stall_timeout_s",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"ray.{name}={getattr(self, name)}; accepted: a number > 0")
        if self.gpus_per_learner is not None and self.gpus_per_learner < 0:
            raise ValueError(
                f"ray.gpus_per_learner={self.gpus_per_learner}; accepted: 0, a fraction such as "
                "0.5, or a whole number of GPUs"
            )
        if (
            self.gpus_per_learner is not None
            and self.gpus_per_learner > 1
            and self.gpus_per_learner % 1
        ):
            raise ValueError(
                f"ray.gpus_per_learner={self.gpus_per_learner}; above 1 Ray accepts only whole GPUs"
            )
        if not 0.0 < self.apex_epsilon <= 1.0:
            raise ValueError(f"ray.apex_epsilon={self.apex_epsilon}; accepted: a number in (0, 1]")
        if self.apex_alpha < 0:
            raise ValueError(f"ray.apex_alpha={self.apex_alpha}; accepted: a number >= 0")
        if self.max_worker_restarts < -1:
            raise ValueError(
                f"ray.max_worker_restarts={self.max_worker_restarts}; accepted: -1 (always) or an integer >= 0"
            )
        if self.max_failures < 0:
            raise ValueError(f"ray.max_failures={self.max_failures}; accepted: an integer >= 0")

    def epsilons(self, index: int) -> list[float]:
        """Ape-X exploration rates of rollout actor ``index``'s envs, spread over all envs."""
        n = self.num_rollout_workers * self.envs_per_worker
        out = []
        for j in range(self.envs_per_worker):
            i = index * self.envs_per_worker + j
            out.append(self.apex_epsilon ** (1 + self.apex_alpha * i / max(1, n - 1)))
        return out


SECTION_TYPES: dict[str, type] = {
    "train": TrainConfig,
    "dqn": DQNConfig,
    "ppo": PPOConfig,
    "atari": AtariConfig,
    "env": EnvConfig,
    "ray": RayConfig,
}


@dataclass(frozen=True)
class RunConfig:
    """Every setting of one run, by section (``cfg.train.steps``, ``cfg.dqn.lr``, ...)."""

    train: TrainConfig = field(default_factory=TrainConfig)
    dqn: DQNConfig = field(default_factory=DQNConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    atari: AtariConfig = field(default_factory=AtariConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    ray: RayConfig = field(default_factory=RayConfig)

    def sections(self) -> dict[str, Any]:
        """``{"train": TrainConfig(...), ...}`` in the order of ``SECTION_TYPES``."""
        return {name: getattr(self, name) for name in SECTION_TYPES}

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain dicts (what a checkpoint stores)."""
        return {name: dataclasses.asdict(obj) for name, obj in self.sections().items()}

    @classmethod
    def from_dict(cls, data: dict[str, dict[str, Any]]) -> RunConfig:
        """Rebuild from :meth:`to_dict` output; missing sections and keys take defaults.

        Raises:
            rlamd.config.errors.ConfigError: an unknown key or an invalid value, named.
        """
        return cls(
            **{
                name: apply_overrides(kind(), name, data.get(name) or {})
                for name, kind in SECTION_TYPES.items()
            }
        )

    @property
    def agent(self) -> Any:
        """The chosen algorithm's own section (``dqn`` or ``ppo``)."""
        return getattr(self, self.train.algo)
