"""Classic-control tasks (CartPole and friends) as vector envs with float observations.

They learn in seconds on a CPU, which makes them the learning tests' workhorse.
"""

from __future__ import annotations

import gymnasium as gym

from .registry import parse_env_id
from .vector import VecEnv

__all__ = ["make_classic"]


def make_classic(name: str, num_envs: int) -> VecEnv:
    """A same-step-autoreset ``SyncVectorEnv`` of a classic task wrapped in :class:`VecEnv`."""
    env_id = parse_env_id(name)
    if env_id.family != "classic":
        raise ValueError(f"'{name}' is not a classic-control task")
    venv = gym.make_vec(
        env_id.game,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    return VecEnv(venv, name=env_id.game)
