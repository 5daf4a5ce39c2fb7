"""Environments for rlamd, installed as ``rlamd.envs``.

Example:
    >>> from rlamd.envs import make_env
    >>> env = make_env("breakout", num_envs=8)
    >>> obs = env.reset(seed=0)   # uint8, shape (8, 4, 84, 84)
"""

from __future__ import annotations

from dataclasses import replace

from .atari import AtariConfig, make_atari
from .checks import EnvFault, EnvHealth, EnvInterrupted
from .classic import make_classic
from .generic import (
    EnvConfig,
    EnvProbe,
    env_family,
    env_notes,
    env_spaces,
    make_generic,
    probe_env,
    render_problem,
    spaces_mismatch,
)
from .registry import EnvId, atari_games, import_env_modules, parse_env_id, register_factory
from .spaces import ActionInfo, ObsTransform, UnsupportedSpace
from .vector import Step, VecEnv

__all__ = [
    "ActionInfo",
    "AtariConfig",
    "EnvConfig",
    "EnvFault",
    "EnvHealth",
    "EnvId",
    "EnvInterrupted",
    "EnvProbe",
    "ObsTransform",
    "Step",
    "UnsupportedSpace",
    "VecEnv",
    "atari_games",
    "env_family",
    "env_notes",
    "env_spaces",
    "import_env_modules",
    "make_atari",
    "make_classic",
    "make_env",
    "make_generic",
    "parse_env_id",
    "probe_env",
    "register_factory",
    "render_problem",
    "spaces_mismatch",
]


def make_env(
    name: str,
    num_envs: int = 8,
    seed: int | None = None,
    atari: AtariConfig | None = None,
    threads: int | None = None,
    *,
    module: str | None = None,
    env_cfg: EnvConfig | None = None,
    render: bool = False,
) -> VecEnv:
    """Build a vector env from any accepted name.

    Args:
        name: ``breakout``, ``BreakoutNoFrameskip-v4``, ``ALE/Breakout-v5``, ``cartpole``,
            any gymnasium id (``Pendulum-v1``) or a ``package.module:factory`` entry point.
        num_envs: environments stepped together.
        seed: if given, the env is reset with it once (env i gets ``seed + i``).
        atari: Atari preprocessing options (ignored for other envs).
        threads: worker threads of ale-py's C++ vector env (``plan_threads(...).env_threads``
            from :mod:`rlamd.threads`); overrides ``atari.num_threads``. None keeps
            ``atari.num_threads`` (default: one per env, up to the cores in the affinity
            mask). Other envs step in the calling thread (or their own processes) and
            ignore it.
        module: modules to import before the env is made (``--env-module``).
        env_cfg: how a non-Atari env is built (vector mode, image conversions).
        render: non-Atari envs: env 0 records rendered frames (``VecEnv.recorder``).

    Raises:
        ValueError: unknown name (with the closest valid names), an env whose spaces rlamd
            cannot train on, num_envs < 1 or threads < 1.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs={num_envs}; accepted: an integer >= 1")
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads={threads!r}; accepted: an integer >= 1, or None")
        atari = replace(atari or AtariConfig(), num_threads=threads)
    env_id = parse_env_id(name, module)
    if env_id.family == "atari":
        env = make_atari(name, num_envs, atari)
    else:
        env = make_generic(env_id.game, num_envs, env_cfg, render=render)
    if seed is not None:
        env.reset(seed=seed)
    return env
