"""The run's configuration: one frozen, typed :class:`RunConfig` of five sections.

``RunConfig.train`` says what to train, for how long and where; ``dqn`` and ``ppo`` hold
the algorithms' settings, ``atari`` the Atari preprocessing and ``ray`` the cluster
layout. Every section is a frozen dataclass with a docstring under each field; the
command line, TOML files and ``--set section.key=value`` all fill the same objects
(:mod:`rlamd.settings` layers them). A ``RunConfig`` is what every part of a run
receives, Ray actors included, and what a checkpoint stores (as plain dicts).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rlamd.agents.dqn import DQNConfig
from rlamd.agents.ppo import PPOConfig
from rlamd.config import apply_overrides
from rlamd.device import parse_device_spec
from rlamd.distributed.config import RayConfig
from rlamd.envs import AtariConfig, parse_env_id
from rlamd.precision import PRECISIONS

__all__ = ["GRAPH_MODES", "SECTION_TYPES", "RunConfig", "TrainConfig"]

GRAPH_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class TrainConfig:
    """What to train, for how long, where, and how the run is logged and saved."""

    env: str = "breakout"
    """Environment: an ALE game (breakout, BreakoutNoFrameskip-v4, ALE/Breakout-v5) or cartpole."""
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
        parse_env_id(self.env)
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

    @property
    def family(self) -> str:
        """``atari`` or ``classic``: which preset the env takes."""
        return parse_env_id(self.env).family


SECTION_TYPES: dict[str, type] = {
    "train": TrainConfig,
    "dqn": DQNConfig,
    "ppo": PPOConfig,
    "atari": AtariConfig,
    "ray": RayConfig,
}


@dataclass(frozen=True)
class RunConfig:
    """Every setting of one run, by section (``cfg.train.steps``, ``cfg.dqn.lr``, ...)."""

    train: TrainConfig = field(default_factory=TrainConfig)
    dqn: DQNConfig = field(default_factory=DQNConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    atari: AtariConfig = field(default_factory=AtariConfig)
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
            rlamd.config.ConfigError: an unknown key or an invalid value, named.
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
