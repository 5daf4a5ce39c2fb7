"""Registers ``RlamdSwap/Walk-v0`` again, with (3,) observations (see :mod:`tests.envs.swap_a`)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from tests.envs.faulty_envs import Walk


class Walk3(Walk):
    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)

    def _obs(self):
        return np.array([self.t / 20, 1.0, 0.0], np.float32)


gym.register("RlamdSwap/Walk-v0", entry_point=Walk3)
