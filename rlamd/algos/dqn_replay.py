"""The replay an off-policy run uses (DQN, SAC, TD3): a storage for the env's observations
and actions and the sampler its settings choose, sized against the free memory before
anything is allocated."""

from __future__ import annotations

from collections.abc import Callable
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
    requested: int | None,
    per_transition: float | Callable[[int | None], float],
    device: torch.device,
    log,
    *,
    setting: str,
) -> int:
    """The replay capacity to allocate, checked against the free memory before allocating.

    ``requested`` None (``dqn.buffer_size=auto``) takes what fits in ``FREE_SHARE`` of the
    free memory, at most the 1M default, and says so; a number that does not fit stops the
    run with the size that would (the kernel's OOM killer would otherwise end it later,
    without a message or a checkpoint). ``per_transition`` is the bytes per transition,
    or its function of the capacity (a prioritized sampler's trees are padded, so a
    transition's share depends on the size): ``auto`` then takes a size that passes the
    same check a size given by number does, so a run resumed at it fits again.

    Raises:
        ConfigError: ``requested`` does not fit.
    """
    cost = per_transition if callable(per_transition) else (lambda _size: per_transition)
    free = free_memory(device)
    where = "host RAM" if device.type == "cpu" else f"{device} memory"
    if free is None:
        return requested or DEFAULT_BUFFER
    budget = FREE_SHARE * free
    fits = _largest_fitting(budget, cost, int(budget / cost(None)))
    if requested is None:
        size = min(fits, DEFAULT_BUFFER)
        log(
            f"rlamd: {setting}=auto: {size:,} transitions ({size * cost(size) / 2**30:.1f} GiB "
            f"of the {free / 2**30:.1f} GiB free {where})"
        )
        return size
    need = requested * cost(requested)
    if need > budget:
        raise ConfigError(
            f"{setting}={requested:,} needs {_size_text(need)} of {where} but "
            f"{_size_text(free)} is free; accepted here: at most {fits:,} "
            f"(--set {setting}={fits}), or --set {setting}=auto to take what fits"
        )
    return requested


def _largest_fitting(budget: float, cost: Callable[[int | None], float], start: int) -> int:
    """The largest size at most ``start`` whose ``size * cost(size)`` is within ``budget``."""
    size = max(start, 1)
    while size > 1 and size * cost(size) > budget:
        size = min(size - 1, int(budget / cost(size)))
    return size


def _size_text(nbytes: float) -> str:
    """``1.2 GiB``, or MiB below a tenth of a GiB (a small replay's needs are not 0.0 GiB)."""
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 0.1 * 2**30 else f"{nbytes / 2**20:.1f} MiB"


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

    def per_t(size: int | None) -> float:
        return bytes_per_transition(shape, obs_dtype, stack, sampler=kind, capacity=size, **actions)

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
