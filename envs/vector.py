"""One vector-env interface for every backend, with real episode statistics.

Backends are gymnasium ``VectorEnv`` objects in *same-step* autoreset mode (ale-py's
C++ ``AtariVectorEnv`` and gymnasium's ``SyncVectorEnv`` both offer it): when an
episode ends, ``step`` returns the first observation of the next one and the last
observation in ``info["final_obs"]``. :class:`VecEnv` adds what training needs:

* ``terminated`` for learning may include a lost life (``episodic_life``), while the
  game itself goes on; ``done`` says the game really ended and was reset;
* rewards are clipped to [-1, 1] for learning if asked, while the episode score
  handed to the trainer stays the real, unclipped game score across all lives;
* actions go from the agents' form to the env's: ``Discrete(n, start)`` gets ``start``
  added; a ``Box`` gets the flat float vector clipped to its bounds and reshaped (the
  unclipped vector is what ``Step.actions`` reports, for the log-probabilities).

gymnasium's ``AsyncVectorEnv`` steps in :meth:`VecEnv.send` / :meth:`VecEnv.recv` as
ale-py's C++ env does (``step_async`` / ``step_wait``), waiting at most ``step_timeout``
seconds: a hung env becomes an :class:`rlamd.envs.checks.EnvFault` naming it, and a vector
env that failed is closed by terminating its processes (a graceful close would wait for
the hung step).
"""

from __future__ import annotations

import multiprocessing
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from .checks import EnvFault
from .spaces import action_info

__all__ = ["Step", "VecEnv"]

_SILENT = 100
"""A ``gymnasium.logger.min_level`` above its ERROR: nothing is printed."""


class Step(NamedTuple):
    """What one vector step returns. Arrays have ``num_envs`` rows."""

    obs: np.ndarray
    """Next observations; for envs with ``done`` the first observation after the reset."""
    reward: np.ndarray
    """float32 learning reward (clipped when ``clip_rewards``)."""
    terminated: np.ndarray
    """bool: no bootstrapping past this step (game over, or a life lost with episodic_life)."""
    truncated: np.ndarray
    """bool: the episode was cut by a time limit; bootstrap from ``final_obs``."""
    done: np.ndarray
    """bool: the episode really ended here and the env was reset."""
    final_obs: np.ndarray
    """Last observation of the ended episode in rows where ``done``; ``obs`` elsewhere."""
    episode_return: np.ndarray
    """float64 unclipped game score of the episode that ended (rows where ``done``)."""
    episode_length: np.ndarray
    """int64 env steps of the episode that ended (rows where ``done``)."""
    actions: np.ndarray
    """int64 actions executed: the ones given, except FIRE forced after a lost life;
    continuous actions: float32 ``(num_envs, k)`` as given, before clipping."""

    def finished(self) -> list[tuple[float, int]]:
        """``(score, length)`` of every episode that ended in this step."""
        return [
            (float(self.episode_return[i]), int(self.episode_length[i]))
            for i in np.flatnonzero(self.done)
        ]


class VecEnv:
    """Wraps a same-step-autoreset gymnasium ``VectorEnv`` (see module docstring)."""

    def __init__(
        self,
        env: gym.vector.VectorEnv,
        *,
        clip_rewards: bool = False,
        episodic_life: bool = False,
        fire_action: int | None = None,
        name: str = "",
        frame_stack: int | None = None,
        recorder: Any = None,
        step_timeout: float | None = None,
    ) -> None:
        self.env = env
        self.name = name
        self._async = isinstance(env, gym.vector.AsyncVectorEnv)
        self.step_timeout = step_timeout if self._async and step_timeout else None
        """Seconds an ``AsyncVectorEnv`` step may take (None: no limit)."""
        self._failed = False
        space = env.single_observation_space
        image = str(space.dtype) == "uint8" and len(space.shape) == 3
        self.frame_stack = frame_stack or (int(space.shape[0]) if image else 1)
        """Frames in one observation that a replay may store apart (the leading axis of
        uint8 images: one channel each)."""
        self.recorder = recorder
        """Env 0's :class:`rlamd.envs.wrappers.FrameRecorder` when made to render, else None."""
        self.actions = action_info(env.single_action_space)
        """The action space as the agents see it (:class:`rlamd.envs.spaces.ActionInfo`)."""
        # How a step starts and ends: ale-py's send/recv, gymnasium's step_async/step_wait
        # (AsyncVectorEnv), or one step() in recv (SyncVectorEnv).
        if hasattr(env, "send") and hasattr(env, "recv"):
            self._start, self._finish = env.send, env.recv
        elif hasattr(env, "step_async"):
            self._start, self._finish = env.step_async, env.step_wait
        else:
            self._start, self._finish = None, None
        self.num_envs = env.num_envs
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space
        self.clip_rewards = clip_rewards
        self.episodic_life = episodic_life
        self._score = np.zeros(self.num_envs, dtype=np.float64)
        self._length = np.zeros(self.num_envs, dtype=np.int64)
        self._lives: np.ndarray | None = None
        # With episodic life a lost life starts a new learning episode, and like a reset
        # it presses FIRE (as SB3's and baselines' FireResetEnv do on every reset):
        # without it the ball is never served and the game stalls.
        self.fire_action = fire_action if episodic_life else None
        self._fire_next = np.zeros(self.num_envs, dtype=bool)
        self._sent = np.zeros(self.num_envs, dtype=np.int64)
        self._to_env: np.ndarray = self._sent

    @property
    def num_actions(self) -> int:
        """Discrete actions (what DQN chooses from)."""
        if self.actions.continuous:
            raise TypeError(
                f"{self.name or 'this env'} has continuous actions {self.single_action_space}; "
                "accepted here: a Discrete action space (train it with --algo ppo)"
            )
        return self.actions.n

    @property
    def continuous(self) -> bool:
        """``Box`` actions (PPO's Gaussian policy)."""
        return self.actions.continuous

    def reset(self, seed: int | None = None) -> np.ndarray:
        obs, info = self.env.reset(seed=seed)
        self._score[:] = 0.0
        self._length[:] = 0
        self._lives = self._read_lives(info)
        self._fire_next[:] = False
        return obs

    @staticmethod
    def _read_lives(info: dict[str, Any]) -> np.ndarray | None:
        lives = info.get("lives")
        return None if lives is None else np.asarray(lives, dtype=np.int64).copy()

    @property
    def can_overlap(self) -> bool:
        """Whether :meth:`send` returns before the envs have stepped (ale-py's C++ threads,
        gymnasium's AsyncVectorEnv processes step them while the caller works; the
        in-process backends step in :meth:`recv`)."""
        return self._start is not None

    def step(self, actions: np.ndarray) -> Step:
        """Step every env with ``actions`` (``send`` then ``recv``)."""
        self.send(actions)
        return self.recv()

    def send(self, actions: np.ndarray) -> None:
        """Start a step; :meth:`recv` finishes it. Nothing else may touch the env between."""
        info = self.actions
        if info.continuous:
            actions = np.asarray(actions, dtype=np.float32).reshape(self.num_envs, -1)
            self._sent = actions
            clipped = np.clip(actions, info.low, info.high).astype(info.dtype, copy=False)
            self._to_env = clipped.reshape(self.num_envs, *info.shape)
        else:
            actions = np.asarray(actions, dtype=np.int64)
            if self.fire_action is not None and self._fire_next.any():
                actions = np.where(self._fire_next, self.fire_action, actions)
            self._sent = actions
            self._to_env = actions + info.start if info.start else actions
        if self._start is not None:
            self._start(self._to_env)

    def recv(self) -> Step:
        """The result of the step :meth:`send` started."""
        actions = self._sent
        try:
            if self._async:
                obs, reward, terminated, truncated, info = self._wait()
            elif self._finish is not None:
                obs, reward, terminated, truncated, info = self._finish()
            else:
                obs, reward, terminated, truncated, info = self.env.step(self._to_env)
        except BaseException:
            self._failed = True
            raise
        reward = np.asarray(reward, dtype=np.float64)
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool)
        done = terminated | truncated
        self._score += reward
        self._length += 1
        ep_return = np.where(done, self._score, 0.0)
        ep_length = np.where(done, self._length, 0)
        self._score[done] = 0.0
        self._length[done] = 0

        final_obs = obs
        if done.any():
            final_obs = obs.copy()
            finals = info["final_obs"]
            for i in np.flatnonzero(done):
                final_obs[i] = finals[i]

        learn_terminated = terminated
        lives = self._read_lives(info)
        if self.episodic_life and lives is not None and self._lives is not None:
            # A life lost (game not over) ends the episode for learning only. After a
            # reset `lives` is the new game's count, so `done` rows are excluded.
            lost = (lives < self._lives) & ~done
            learn_terminated = terminated | lost
            self._fire_next = lost
        self._lives = lives

        learn_reward = np.clip(reward, -1.0, 1.0) if self.clip_rewards else reward
        return Step(
            obs=obs,
            reward=learn_reward.astype(np.float32),
            terminated=learn_terminated,
            truncated=truncated & ~terminated,
            done=done,
            final_obs=final_obs,
            episode_return=ep_return,
            episode_length=ep_length,
            actions=actions,
        )

    def _wait(self) -> tuple:
        """``step_wait`` within ``step_timeout``, gymnasium's own error log silenced (the
        error it re-raises is the one line to print)."""
        level = gym.logger.min_level
        gym.logger.min_level = _SILENT
        try:
            return self.env.step_wait(self.step_timeout)
        except multiprocessing.TimeoutError:
            pipes = getattr(self.env, "parent_pipes", [])
            hung = [i for i, p in enumerate(pipes) if p is not None and not p.poll()]
            raise EnvFault(
                f"env {self.name} (env {', '.join(map(str, hung)) or '?'}): step() took longer "
                f"than env.step_timeout={self.step_timeout:g} s; accepted: a step that returns "
                "(raise env.step_timeout for a slow env, 0: wait forever)"
            ) from None
        finally:
            gym.logger.min_level = level

    def close(self) -> None:
        """Close the envs; after a failed or interrupted step, an ``AsyncVectorEnv``'s
        processes are terminated instead of waited for."""
        if self._async and self._failed:
            self.env.close(terminate=True)
        else:
            self.env.close()

    def __enter__(self) -> VecEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
