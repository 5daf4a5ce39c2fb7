"""Envs that misbehave the ways a user's env can (``--env-module tests.envs.faulty_envs``).

Each is a small line walk (``Discrete(2)`` actions, float32 ``(2,)`` observations) that
breaks its contract after ``AFTER`` steps of one instance, so rlamd's one probe step and
the first iterations pass and the fault comes in the middle of training: NaN rewards or
observations, an exception in ``step``, an observation of the wrong shape, an array reward,
``reset`` returning a bare observation, an episode that never ends, a ``step`` that hangs.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np

AFTER = 100
"""Steps one env instance takes before it misbehaves."""


class Walk(gym.Env):
    """Episodes of 20 steps: reward 1 for action 1, else 0; observation (t / 20, 1)."""

    limit: int | None = 20

    def __init__(self, render_mode: str | None = None) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.render_mode = render_mode
        self.t = 0
        self.steps = 0

    def _obs(self) -> Any:
        return np.array([self.t / 20, 1.0], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _reward(self, action: Any) -> Any:
        return float(action)

    def step(self, action: Any):
        self.t += 1
        self.steps += 1
        ended = self.limit is not None and self.t >= self.limit
        return self._obs(), self._reward(action), ended, False, {}

    @property
    def broken(self) -> bool:
        return self.steps > AFTER


class NaNReward(Walk):
    def _reward(self, action: Any) -> Any:
        return float("nan") if self.broken else float(action)


class NaNObs(Walk):
    def _obs(self) -> Any:
        obs = super()._obs()
        return obs * np.nan if self.broken else obs


class StepRaises(Walk):
    def step(self, action: Any):
        if self.broken:
            raise RuntimeError("the simulator lost its connection")
        return super().step(action)


class WrongShape(Walk):
    def _obs(self) -> Any:
        return np.zeros(3, np.float32) if self.broken else super()._obs()


class ArrayReward(Walk):
    def _reward(self, action: Any) -> Any:
        return np.array([1.0, 2.0]) if self.broken else float(action)


class BareReset(Walk):
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, _ = super().reset(seed=seed)
        return obs


class NeverEnds(Walk):
    """No episode ever ends, and the id has no time limit."""

    limit = None


class HangingStep(Walk):
    def step(self, action: Any):
        if self.broken:
            time.sleep(3600)
        return super().step(action)


IDS = {
    cls.__name__: f"RlamdFaulty/{cls.__name__}-v0"
    for cls in (NaNReward, NaNObs, StepRaises, WrongShape, ArrayReward, BareReset, NeverEnds)
}
IDS["HangingStep"] = "RlamdFaulty/HangingStep-v0"
for _cls in (NaNReward, NaNObs, StepRaises, WrongShape, ArrayReward, BareReset, NeverEnds):
    gym.register(IDS[_cls.__name__], entry_point=_cls)
gym.register(IDS["HangingStep"], entry_point=HangingStep)
