"""Environments for rlamd, installed as ``rlamd.envs``.

Example:
    >>> from rlamd.envs import make_env
    >>> env = make_env("breakout", num_envs=8)
    >>> obs = env.reset(seed=0)   # uint8, shape (8, 4, 84, 84)
"""

from __future__ import annotations

from dataclasses import replace

from .atari import AtariConfig, make_atari
from .classic import make_classic
from .registry import EnvId, atari_games, parse_env_id
from .vector import Step, VecEnv

__all__ = [
    "AtariConfig",
    "EnvId",
    "Step",
    "VecEnv",
    "atari_games",
    "make_atari",
    "make_classic",
    "make_env",
    "parse_env_id",
]


def make_env(
    name: str,
    num_envs: int = 8,
    seed: int | None = None,
    atari: AtariConfig | None = None,
    threads: int | None = None,
) -> VecEnv:
    """Build a vector env from any accepted name.

    Args:
        name: ``breakout``, ``BreakoutNoFrameskip-v4``, ``ALE/Breakout-v5``, ``cartpole``...
        num_envs: environments stepped together.
        seed: if given, the env is reset with it once (env i gets ``seed + i``).
        atari: Atari preprocessing options (ignored for classic tasks).
        threads: worker threads of ale-py's C++ vector env (``plan_threads(...).env_threads``
            from :mod:`rlamd.threads`); overrides ``atari.num_threads``. None keeps
            ``atari.num_threads`` (default: one per env, up to the cores in the affinity
            mask). Classic tasks step in the calling thread and ignore it.

    Raises:
        ValueError: unknown name (with the closest valid names), num_envs < 1 or
            threads < 1.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs={num_envs}; accepted: an integer >= 1")
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads={threads!r}; accepted: an integer >= 1, or None")
        atari = replace(atari or AtariConfig(), num_threads=threads)
    env_id = parse_env_id(name)
    env = (
        make_classic(name, num_envs)
        if env_id.family == "classic"
        else make_atari(name, num_envs, atari)
    )
    if seed is not None:
        env.reset(seed=seed)
    return env
