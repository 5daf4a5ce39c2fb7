"""Classic-control tasks (CartPole and friends) as vector envs with float observations.

They learn in seconds on a CPU, which makes them the learning tests' workhorse. They are
built like any gymnasium env (:func:`rlamd.envs.generic.make_generic`); their float32
vector observations pass unchanged.
"""

from __future__ import annotations

from .generic import EnvConfig, make_generic
from .registry import parse_env_id
from .vector import VecEnv

__all__ = ["make_classic"]


def make_classic(
    name: str, num_envs: int, cfg: EnvConfig | None = None, *, render: bool = False
) -> VecEnv:
    """A same-step-autoreset vector env of a classic task wrapped in :class:`VecEnv`."""
    env_id = parse_env_id(name)
    if env_id.family != "classic":
        raise ValueError(f"'{name}' is not a classic-control task")
    return make_generic(env_id.game, num_envs, cfg, render=render)
