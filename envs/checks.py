"""A user's env checked against its own spaces, on the way into rlamd.

A gymnasium env is untrusted input: it may raise, return the old API's tuples, a bare
observation from ``reset``, an observation of another shape than its space promises, an
array where a reward belongs, NaN, or hang. Two pieces catch that where it enters:

* :class:`CheckedEnv` wraps each raw env (innermost, before rlamd's conversions) and checks
  the *structure* of what ``reset`` and ``step`` return (tuple sizes, the observation's
  shape and kind, a scalar reward): a few O(1) checks per env step. An exception the env
  raises, or a broken promise, becomes an :class:`EnvFault` whose text is one line naming
  the env, the method and what was wrong against what the space promised.
* :class:`EnvHealth` counts non-finite observations and rewards per env index on the
  batch the vector env returns (vectorised numpy on host arrays, no device sync), read
  once per log interval.

The run loop turns an :class:`EnvFault` into one line, a checkpoint and the resume command
(docs/ARCHITECTURE.md, "When a user's env misbehaves").
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["CheckedEnv", "EnvFault", "EnvHealth", "EnvInterrupted", "describe_value"]

_MAX_TEXT = 160


class EnvFault(RuntimeError):
    """An env broke its contract; ``str()`` is the one line to print.

    It takes one argument (its text, or an ``EnvFault``), so gymnasium's ``AsyncVectorEnv``
    can re-raise it in the main process from a worker's error.
    """

    def __init__(self, text: Any = "") -> None:
        super().__init__(str(text))


class EnvInterrupted(KeyboardInterrupt):
    """Ctrl-C arrived while the env was stepping or resetting (a hung env): the agent and
    replay are as the last finished step left them, so a checkpoint can still be written."""


def _short(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= _MAX_TEXT else first[: _MAX_TEXT - 3] + "..."


def describe_value(value: Any) -> str:
    """A few words for what a value is: ``ndarray float64 (3,)``, ``tuple of 4``, ``None``."""
    if isinstance(value, np.ndarray):
        return f"an array {value.dtype} of shape {value.shape}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    if value is None:
        return "None"
    return f"{type(value).__name__} {_short(repr(value))}"


def _space(space: gym.Space) -> str:
    return _short(str(space))


class CheckedEnv(gym.Wrapper):
    """Checks what ``reset`` and ``step`` return against gymnasium's API and the env's
    ``observation_space``; raises :class:`EnvFault` (see the module docstring).

    Args:
        env: the user's env as made (before rlamd's conversions).
        name: the env's name (the id or entry point), for the message.
        index: the env's index in its vector env.
    """

    def __init__(self, env: gym.Env, name: str, index: int = 0) -> None:
        super().__init__(env)
        self._where = f"{name} (env {index})"
        space = env.observation_space
        self._box = isinstance(space, gym.spaces.Box)
        self._shape = tuple(space.shape) if self._box else None
        self._discrete = isinstance(space, gym.spaces.Discrete)

    def _fault(self, method: str, what: str) -> EnvFault:
        return EnvFault(f"env {self._where}: {method}() {what}")

    def _call(self, method: str, fn, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EnvFault:
            raise
        except Exception as exc:
            raise self._fault(
                method, f"raised {exc.__class__.__name__}: {_short(str(exc)) or 'no detail'}"
            ) from exc

    def _check_obs(self, method: str, obs: Any) -> None:
        space = self.env.observation_space
        if self._box:
            try:
                arr = np.asarray(obs)
            except Exception:  # a ragged list: no array at all
                arr = None
            if arr is None or arr.shape != self._shape or arr.dtype.kind not in "biuf":
                raise self._fault(
                    method,
                    f"returned an observation that is {describe_value(obs)}; its "
                    f"observation_space promises {_space(space)}",
                )
        elif self._discrete and not (
            isinstance(obs, int | np.integer) or (isinstance(obs, np.ndarray) and obs.ndim == 0)
        ):
            raise self._fault(
                method,
                f"returned an observation that is {describe_value(obs)}; its "
                f"observation_space promises {_space(space)} (one integer)",
            )

    def reset(self, **kwargs: Any):  # type: ignore[override]
        out = self._call("reset", self.env.reset, **kwargs)
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)):
            raise self._fault(
                "reset",
                f"returned {describe_value(out)}; accepted: (observation, info), the "
                "gymnasium API (a bare observation is the old gym API)",
            )
        self._check_obs("reset", out[0])
        return out

    def step(self, action: Any):  # type: ignore[override]
        out = self._call("step", self.env.step, action)
        if not (isinstance(out, tuple) and len(out) == 5):
            raise self._fault(
                "step",
                f"returned {describe_value(out)}; accepted: (observation, reward, terminated, "
                "truncated, info), the gymnasium API (4 values are the old gym API)",
            )
        obs, reward, terminated, truncated, _ = out
        self._check_obs("step", obs)
        if np.ndim(reward) != 0 or np.asarray(reward).dtype.kind not in "biuf":
            raise self._fault(
                "step", f"returned a reward that is {describe_value(reward)}; accepted: one number"
            )
        for flag, value in (("terminated", terminated), ("truncated", truncated)):
            if np.ndim(value) != 0:
                raise self._fault(
                    "step", f"returned {flag} as {describe_value(value)}; accepted: one bool"
                )
        return out


class EnvHealth:
    """Non-finite observations and rewards per env index, counted on each batch.

    Args:
        num_envs: envs in the vector env.
        name: the env's name, for :meth:`take`'s line.
    """

    def __init__(self, num_envs: int, name: str = "the env") -> None:
        self.name = name
        self.obs = np.zeros(num_envs, dtype=np.int64)
        """Steps whose observation held a NaN or an infinity, per env, since :meth:`take`."""
        self.reward = np.zeros(num_envs, dtype=np.int64)
        """Steps whose reward was NaN or infinite, per env, since :meth:`take`."""
        self.total_obs = 0
        self.total_reward = 0

    def check_obs(self, obs: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Count the rows of a float batch ``obs`` (``rows``: their env indices) that are not
        all finite; integer observations (images) cannot be."""
        if obs.dtype.kind != "f" or obs.size == 0:
            return
        bad = ~np.isfinite(obs.reshape(obs.shape[0], -1)).all(axis=1)
        if bad.any():
            np.add.at(self.obs, np.flatnonzero(bad) if rows is None else rows[bad], 1)

    def check_reward(self, reward: np.ndarray) -> None:
        bad = ~np.isfinite(reward)
        if bad.any():
            self.reward += bad

    def take(self) -> str | None:
        """One line on what was counted since the last call (None: nothing), then reset."""
        parts = []
        for what, counts in (("observations", self.obs), ("rewards", self.reward)):
            if counts.any():
                envs = ", ".join(f"env {i}: {counts[i]:,}" for i in np.flatnonzero(counts)[:8])
                parts.append(f"non-finite {what} in {int(counts.sum()):,} steps ({envs})")
        self.total_obs += int(self.obs.sum())
        self.total_reward += int(self.reward.sum())
        self.obs[:] = 0
        self.reward[:] = 0
        if not parts:
            return None
        return (
            f"rlamd: warning: {self.name} returned {' and '.join(parts)} since the last line; "
            "an update whose batch holds one is skipped"
        )
