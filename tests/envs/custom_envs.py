"""Envs a user might bring, registered on import (``--env-module tests.envs.custom_envs``).

They are built to be awkward where a generic path could break: float64 observations with
+-inf bounds, ``Discrete(n, start=...)`` actions, ``Box`` actions with uneven bounds, a
time limit, no render support, a factory that ignores ``render_mode``, extra keys in
``reset``'s info, image observations, and spaces rlamd refuses.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

ENV_ID = "RlamdTest/Corridor-v0"
CONTINUOUS_ID = "RlamdTest/Reach-v0"
IMAGE_ID = "RlamdTest/Pixels-v0"


class Corridor(gym.Env):
    """Walk right along a line: actions ``Discrete(3, start=-1)`` mean left, stay, right.

    Observations are float64 ``(position, 1.0)`` in a ``Box`` with +-inf bounds; reaching
    position 5 terminates with reward 1, every step costs 0.01. ``reset`` returns extra
    info keys. It cannot render.
    """

    def __init__(self, render_mode: str | None = None) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.action_space = gym.spaces.Discrete(3, start=-1)
        self.render_mode = render_mode
        self.pos = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos = int(self.np_random.integers(0, 2))
        return self._obs(), {"start": self.pos, "note": "extra key"}

    def _obs(self) -> np.ndarray:
        return np.array([self.pos, 1.0], dtype=np.float64)

    def step(self, action: Any):
        assert self.action_space.contains(action), action
        self.pos = max(0, self.pos + int(action))
        done = self.pos >= 5
        return self._obs(), (1.0 if done else -0.01), done, False, {"pos": self.pos}


class Reach(gym.Env):
    """Move a point towards a target: ``Box`` actions of shape (2,) with uneven bounds
    (``[-1, 0]`` to ``[3, 0.5]``), float32 observations (point, target); reward minus the
    distance; rgb rendering of a small picture."""

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, render_mode: str | None = None) -> None:
        self.observation_space = gym.spaces.Box(-10.0, 10.0, (4,), np.float32)
        low, high = np.array([-1.0, 0.0], np.float32), np.array([3.0, 0.5], np.float32)
        self.action_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.render_mode = render_mode
        self.point = np.zeros(2, np.float32)
        self.target = np.zeros(2, np.float32)
        self.last_action = np.zeros(2, np.float32)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.point = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.target = np.array([2.0, 0.25], np.float32)
        self.t = 0
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.concatenate([self.point, self.target]).astype(np.float32)

    def step(self, action: Any):
        action = np.asarray(action, dtype=np.float32)
        assert action.shape == (2,) and self.action_space.contains(action), action
        self.last_action = action
        self.point = np.clip(self.point + 0.1 * (action - self.point), -10, 10)
        self.t += 1
        reward = -float(np.linalg.norm(self.point - self.target))
        return self._obs(), reward, False, False, {}

    def render(self) -> np.ndarray:
        frame = np.zeros((48, 64, 3), np.uint8)
        x = int(np.clip((self.point[0] + 2) * 12, 0, 63))
        frame[:, x] = (255, 128, 0)
        frame[0, self.t % 64] = 255  # every frame differs (a GIF merges equal ones)
        return frame


class Pixels(gym.Env):
    """RGB ``(40, 48, 3)`` uint8 observations, ``Discrete(2)`` actions: reward 1 for the
    action that matches the colour shown. 20 steps per episode (its own truncation)."""

    def __init__(self, render_mode: str | None = None) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (40, 48, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.render_mode = render_mode
        self.colour, self.t = 0, 0

    def _obs(self) -> np.ndarray:
        frame = np.zeros((40, 48, 3), np.uint8)
        frame[..., self.colour] = 200
        return frame

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.colour, self.t = int(self.np_random.integers(0, 2)), 0
        return self._obs(), {}

    def step(self, action: Any):
        reward = 1.0 if int(action) == self.colour else 0.0
        self.colour, self.t = int(self.np_random.integers(0, 2)), self.t + 1
        return self._obs(), reward, False, self.t >= 20, {}


class DictObs(Corridor):
    """A ``Dict`` observation space, which rlamd refuses."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode)
        self.observation_space = gym.spaces.Dict({"pos": gym.spaces.Discrete(10)})

    def _obs(self) -> dict:
        return {"pos": self.pos}


def make_corridor() -> gym.Env:
    """A factory that ignores ``render_mode`` (it takes none) and sets no time limit."""
    return Corridor()


def make_reach(render_mode: str | None = None) -> gym.Env:
    """A factory that passes ``render_mode`` on, with a 50-step time limit."""
    return gym.wrappers.TimeLimit(Reach(render_mode=render_mode), 50)


gym.register(ENV_ID, entry_point=Corridor, max_episode_steps=40)
gym.register(CONTINUOUS_ID, entry_point=Reach, max_episode_steps=50)
gym.register(IMAGE_ID, entry_point=Pixels)
