"""The replay an off-policy run uses (DQN, SAC, TD3): a storage for the env's observations
and actions and the sampler its settings choose, sized against the free memory before
anything is allocated."""

from __future__ import annotations

from typing import Any, Protocol

import torch

from rlamd.agents.dqn import DQNConfig
from rlamd.config.errors import ConfigError
from rlamd.envs import VecEnv
from rlamd.hostalloc import host_free_bytes
from rlamd.replay import (
    Buffer,
    PrioritizedSampler,
    Sampler,
    TransitionStorage,
    UniformSampler,
    bytes_per_transition,
)
from rlamd.seeding import stream_seed

from .base import obs_info

__all__ = [
    "DEFAULT_BUFFER",
    "FREE_SHARE",
    "ReplaySettings",
    "build_replay",
    "fit_capacity",
    "free_memory",
]


class ReplaySettings(Protocol):
    """The settings a replay is built from (``DQNConfig``, SAC's and TD3's sections)."""

    buffer_size: int | None
    n_step: int
    gamma: float
    prioritized: bool
    alpha: float
    priority_eps: float


DEFAULT_BUFFER: int = DQNConfig.buffer_size or 1_000_000
"""The most ``dqn.buffer_size=auto`` takes (the Atari default)."""


def free_memory(device: torch.device) -> int | None:
    """Bytes free for a new replay on ``device`` (host: :func:`rlamd.hostalloc.host_free_bytes`), None if unknown."""
    try:
        if device.type == "cuda":
            return int(torch.cuda.mem_get_info(device)[0])
        return host_free_bytes()
    except (OSError, KeyError, RuntimeError, ValueError):
        return None


FREE_SHARE = 0.8
"""Share of the free memory a replay may take (the rest: networks, envs, the OS)."""


def fit_capacity(
    requested: int | None, per_transition: float, device: torch.device, log, *, setting: str
) -> int:
    """The replay capacity to allocate, checked against the free memory before allocating.

    ``requested`` None (``dqn.buffer_size=auto``) takes what fits in ``FREE_SHARE`` of the
    free memory, at most the 1M default, and says so; a number that does not fit stops the
    run with the size that would (the kernel's OOM killer would otherwise end it later,
    without a message or a checkpoint).

    Raises:
        ConfigError: ``requested`` does not fit.
    """
    free = free_memory(device)
    where = "host RAM" if device.type == "cpu" else f"{device} memory"
    if free is None:
        return requested or DEFAULT_BUFFER
    fits = int(FREE_SHARE * free / per_transition)
    need = (requested or 0) * per_transition
    if requested is None:
        size = min(fits, DEFAULT_BUFFER)
        log(
            f"rlamd: {setting}=auto: {size:,} transitions ({size * per_transition / 2**30:.1f} GiB "
            f"of the {free / 2**30:.1f} GiB free {where})"
        )
        return size
    if requested > fits:
        raise ConfigError(
            f"{setting}={requested:,} needs {need / 2**30:.1f} GiB of {where} but "
            f"{free / 2**30:.1f} GiB is free; accepted here: at most {fits:,} "
            f"(--set {setting}={fits}), or --set {setting}=auto to take what fits"
        )
    return requested


def _action_layout(env: VecEnv) -> dict[str, Any]:
    """How the storage keeps ``env``'s actions: discrete ones as small integers, a ``Box``
    as ``(size,)`` float32 vectors."""
    if env.continuous:
        return {"action_shape": (env.actions.size,), "action_dtype": torch.float32}
    return {"num_actions": env.num_actions}


def build_replay(
    cfg: ReplaySettings,
    env: VecEnv,
    device: torch.device,
    seed: int,
    log=print,
    *,
    num_streams: int | None = None,
    capacity: int | None = None,
    setting: str = "dqn.buffer_size",
    stream: str = "replay",
) -> Buffer:
    """The replay a run uses for ``env``, its size checked against the free memory: a
    :class:`~rlamd.replay.TransitionStorage` and the sampler ``cfg.prioritized`` chooses.

    A Ray learner's shard passes its own ``num_streams`` (the envs of the rollout actors
    feeding it), ``capacity`` (its share of ``cfg.buffer_size``) and ``stream`` (the name
    its draws' seed is derived under with the run seed, :func:`rlamd.seeding.stream_seed`).
    """
    shape, obs_dtype, stack = obs_info(env)
    actions = _action_layout(env)
    kind: type[UniformSampler] = PrioritizedSampler if cfg.prioritized else UniformSampler
    asked = capacity or cfg.buffer_size
    per_t = bytes_per_transition(shape, obs_dtype, stack, sampler=kind, capacity=asked, **actions)
    capacity = fit_capacity(capacity or cfg.buffer_size, per_t, device, log, setting=setting)
    storage = TransitionStorage(
        capacity,
        num_streams or env.num_envs,
        shape,
        obs_dtype,
        frame_stack=stack,
        n_step=cfg.n_step,
        gamma=cfg.gamma,
        device=device,
        **actions,
    )
    sampler: Sampler = (
        PrioritizedSampler(
            storage.capacity, alpha=cfg.alpha, epsilon=cfg.priority_eps, device=device
        )
        if cfg.prioritized
        else UniformSampler(storage.capacity, device=device)
    )
    return Buffer(storage, sampler, seed=stream_seed(seed, stream))
