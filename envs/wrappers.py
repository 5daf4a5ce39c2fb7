"""gymnasium wrappers rlamd puts around one env of a generic vector env.

* :class:`TransformObs` applies an :class:`rlamd.envs.spaces.ObsTransform`;
* :class:`StackFrames` stacks the last ``k`` image frames along the channels (zeros
  before an episode's first frame, as the Atari pipeline does);
* :class:`FrameRecorder` keeps the rendered frames of each episode (for ``evaluate
  --video``), the last one included, before the vector env's same-step reset.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from .spaces import ObsTransform

__all__ = ["FrameRecorder", "StackFrames", "TransformObs"]


class TransformObs(gym.ObservationWrapper):
    """Observations through ``transform``; the observation space is its output space."""

    def __init__(self, env: gym.Env, transform: ObsTransform) -> None:
        super().__init__(env)
        self.transform = transform
        self.observation_space = transform.observation_space

    def observation(self, observation: Any) -> np.ndarray:
        return self.transform(observation)


class StackFrames(gym.Wrapper):
    """``(C, H, W)`` frames -> ``(k*C, H, W)``: the last ``k``, oldest first, zeros before
    the episode's first frame."""

    def __init__(self, env: gym.Env, k: int) -> None:
        super().__init__(env)
        c, h, w = env.observation_space.shape
        self._c = c
        self._stack = np.zeros((k * c, h, w), dtype=np.uint8)
        self.observation_space = gym.spaces.Box(0, 255, self._stack.shape, np.uint8)

    def _push(self, frame: np.ndarray) -> np.ndarray:
        self._stack[: -self._c] = self._stack[self._c :]
        self._stack[-self._c :] = frame
        return self._stack.copy()

    def reset(self, **kwargs: Any):  # type: ignore[override]
        obs, info = self.env.reset(**kwargs)
        self._stack[:] = 0
        return self._push(obs), info

    def step(self, action: Any):  # type: ignore[override]
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._push(obs), reward, terminated, truncated, info


class FrameRecorder(gym.Wrapper):
    """Renders after every reset and step; :meth:`take` hands over finished episodes.

    The env must have been made with ``render_mode="rgb_array"``. A frame that is not an
    ``(H, W, 3)`` or ``(H, W)`` array ends the recording with ``failed`` set.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._current: list[np.ndarray] = []
        self._done: list[list[np.ndarray]] = []
        self.failed: str | None = None

    def _grab(self) -> None:
        if self.failed is not None:
            return
        frame = self.env.render()
        if not isinstance(frame, np.ndarray) or frame.ndim not in (2, 3):
            self.failed = f"render() returned {type(frame).__name__}, not an image array"
            return
        self._current.append(np.asarray(frame, dtype=np.uint8))

    def reset(self, **kwargs: Any):  # type: ignore[override]
        out = self.env.reset(**kwargs)
        if self._current:
            self._done.append(self._current)
        self._current = []
        self._grab()
        return out

    def step(self, action: Any):  # type: ignore[override]
        out = self.env.step(action)
        self._grab()
        if out[2] or out[3]:
            self._done.append(self._current)
            self._current = []
        return out

    def take(self) -> list[list[np.ndarray]]:
        """The frames of each episode finished since the last call, oldest first."""
        done, self._done = self._done, []
        return done
