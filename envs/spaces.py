"""What rlamd accepts of an env's observation and action spaces, and how it converts them.

Observations (one env's, before batching):

* a ``Box`` that is not an image -> a flat ``float32`` vector (any dtype, any shape,
  bounds of +-inf included) for the MLP;
* ``Discrete(n, start)`` -> a one-hot ``float32`` vector of length ``n``;
* an image -> ``uint8`` channels first ``(C, H, W)`` for the CNN: a ``uint8`` ``Box`` of
  shape ``(H, W, C)`` with ``C`` in 1..4, or ``(H, W)``; optionally grayscale and resized
  (:class:`ObsTransform`); frame stacking is a wrapper (:mod:`rlamd.envs.wrappers`);
* anything else (``Dict``, ``Tuple``, ``Text``, ``Graph``, ...) is refused in one line.

Actions: ``Discrete(n, start)`` (the agent picks 0..n-1, the env gets ``start`` added) or
a floating-point ``Box`` of any shape (the agent acts on the flat vector; the env gets it
clipped to the bounds and reshaped). Anything else is refused in one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

__all__ = [
    "CNN_MIN_SIDE",
    "ActionInfo",
    "ObsTransform",
    "UnsupportedSpace",
    "action_info",
    "is_image_space",
]

CNN_MIN_SIDE = 36
"""The Nature CNN's smallest input side (8x8 stride 4, 4x4 stride 2, 3x3 stride 1)."""

OBS_ACCEPTED = (
    "accepted: a Box (vectors of any shape, flattened; uint8 images H x W x C), or "
    "Discrete (one-hot); flatten other spaces in your env, e.g. with "
    "gymnasium.wrappers.FlattenObservation"
)
ACTIONS_ACCEPTED = "accepted: Discrete(n) (DQN, PPO) or a float Box (PPO, SAC, TD3)"


class UnsupportedSpace(ValueError):
    """An observation or action space rlamd cannot train on (the message names it)."""


def _describe(space: gym.Space) -> str:
    text = str(space)
    return text if len(text) <= 120 else text[:117] + "..."


def is_image_space(space: gym.Space) -> bool:
    """A ``uint8`` ``Box`` of shape ``(H, W, C)`` with ``C`` <= 4, or ``(H, W)``."""
    if not isinstance(space, gym.spaces.Box) or space.dtype != np.uint8:
        return False
    shape = space.shape
    return len(shape) == 2 or (len(shape) == 3 and 1 <= shape[-1] <= 4)


@dataclass(frozen=True)
class ActionInfo:
    """An action space as the agents see it."""

    n: int
    """Discrete: the number of actions (0 for a Box)."""
    start: int
    """Discrete: what the env calls action 0 (``Discrete(n, start)``)."""
    shape: tuple[int, ...]
    """Box: the env's action shape (``()`` for Discrete)."""
    low: np.ndarray | None
    """Box: the lower bounds, flat float32 (None for Discrete)."""
    high: np.ndarray | None
    """Box: the upper bounds, flat float32 (None for Discrete)."""
    dtype: np.dtype | None
    """Box: the dtype the env takes."""

    @property
    def continuous(self) -> bool:
        return self.n == 0

    @property
    def size(self) -> int:
        """Discrete: the number of actions; Box: the length of the flat action vector."""
        return self.n or math.prod(self.shape)


def action_info(space: gym.Space) -> ActionInfo:
    """What the agents make of ``space``.

    Raises:
        UnsupportedSpace: neither ``Discrete`` nor a floating-point ``Box``.
    """
    if isinstance(space, gym.spaces.Discrete):
        return ActionInfo(int(space.n), int(space.start), (), None, None, None)
    if isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating):
        low = np.asarray(space.low, dtype=np.float32).reshape(-1)
        high = np.asarray(space.high, dtype=np.float32).reshape(-1)
        return ActionInfo(0, 0, tuple(space.shape), low, high, np.dtype(space.dtype))
    raise UnsupportedSpace(f"action space {_describe(space)} is not supported; {ACTIONS_ACCEPTED}")


class ObsTransform:
    """One env's raw observation -> what the networks take (see the module docstring).

    Used by the env wrapper while training and evaluating, and by
    :func:`rlamd.load`'s policies on the observations a user's own loop hands them.

    Args:
        space: the env's observation space.
        grayscale: images: RGB(A) to one gray channel.
        resize: images: to ``resize x resize`` pixels (0 keeps the size).

    Raises:
        UnsupportedSpace: a space of another kind, or an image too small for the CNN.
    """

    def __init__(self, space: gym.Space, *, grayscale: bool = False, resize: int = 0) -> None:
        self.space, self.grayscale, self.resize = space, grayscale, resize
        if is_image_space(space):
            self.kind = "image"
            h, w = space.shape[:2]
            c = 1 if len(space.shape) == 2 or grayscale else space.shape[2]
            h, w = (resize, resize) if resize else (h, w)
            if min(h, w) < CNN_MIN_SIDE:
                raise UnsupportedSpace(
                    f"image observations of {h}x{w} pixels are too small for the CNN; accepted: "
                    f"at least {CNN_MIN_SIDE}x{CNN_MIN_SIDE} (--set env.resize=84 resizes them)"
                )
            self.observation_space = gym.spaces.Box(0, 255, (c, h, w), np.uint8)
        elif isinstance(space, gym.spaces.Box):
            self.kind = "vector"
            self.observation_space = gym.spaces.Box(
                np.asarray(space.low, dtype=np.float32).reshape(-1),
                np.asarray(space.high, dtype=np.float32).reshape(-1),
                dtype=np.float32,
            )
        elif isinstance(space, gym.spaces.Discrete):
            self.kind = "discrete"
            self.observation_space = gym.spaces.Box(0.0, 1.0, (int(space.n),), np.float32)
        else:
            raise UnsupportedSpace(
                f"observation space {_describe(space)} is not supported; {OBS_ACCEPTED}"
            )

    @property
    def identity(self) -> bool:
        """True when observations pass unchanged (a flat float32 Box: CartPole and friends)."""
        s = self.space
        return self.kind == "vector" and s.dtype == np.float32 and len(s.shape) == 1

    def __call__(self, obs) -> np.ndarray:
        if self.kind == "vector":
            return np.asarray(obs, dtype=np.float32).reshape(-1)
        if self.kind == "discrete":
            out = np.zeros(self.observation_space.shape, dtype=np.float32)
            out[int(obs) - int(self.space.start)] = 1.0
            return out
        return self._image(np.asarray(obs, dtype=np.uint8))

    def _image(self, img: np.ndarray) -> np.ndarray:
        import cv2

        if img.ndim == 3 and self.grayscale and img.shape[2] > 1:
            code = cv2.COLOR_RGBA2GRAY if img.shape[2] == 4 else cv2.COLOR_RGB2GRAY
            img = cv2.cvtColor(img, code) if img.shape[2] in (3, 4) else img[..., :1]
        if self.resize and img.shape[:2] != (self.resize, self.resize):
            img = cv2.resize(img, (self.resize, self.resize), interpolation=cv2.INTER_AREA)
        if img.ndim == 2:
            return img[None]
        return np.ascontiguousarray(img.transpose(2, 0, 1))
