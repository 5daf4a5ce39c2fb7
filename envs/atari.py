"""Atari environments: ale-py's C++ ``AtariVectorEnv`` by default, gymnasium as fallback.

Preprocessing follows common practice (Mnih et al. 2015, Machado et al. 2018): up to 30
no-ops on reset, frame skip 4 with a max-pool over the last two frames, 84x84
grayscale, a stack of 4 (zeros before the first frame of an episode), FIRE on reset,
episodic life and reward clipping for training only, sticky actions configurable.
Observations are ``uint8`` arrays ``(num_envs, 4, 84, 84)`` from either backend.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import gymnasium as gym

from rlamd.cpuload import cores_available

from .registry import parse_env_id
from .vector import VecEnv

__all__ = ["AtariConfig", "make_atari"]

_BACKENDS = ("auto", "ale", "gymnasium")


@dataclass(frozen=True)
class AtariConfig:
    """How an Atari vector env is built."""

    sticky: float | None = None
    """Sticky-action probability; None takes the id's (v5: 0.25, else 0)."""
    noop_max: int = 30
    """Up to this many no-op actions at each reset."""
    frame_skip: int = 4
    """Emulator frames per agent step (max-pooled over the last two)."""
    frame_stack: int = 4
    """Frames stacked into one observation."""
    screen_size: int = 84
    """Side of the square grayscale frame."""
    episodic_life: bool = True
    """A lost life ends the episode for learning (the game goes on)."""
    clip_rewards: bool = True
    """Learning rewards clipped to [-1, 1] (scores stay real)."""
    fire_reset: bool = True
    """Press FIRE after each reset in games that need it."""
    max_episode_frames: int = 108_000
    """Truncate an episode after this many emulator frames (30 minutes of play)."""
    backend: str = "auto"
    """``ale`` (C++ vector env), ``gymnasium`` (Python wrappers) or ``auto``."""
    num_threads: int = 0
    """Emulator threads for the C++ backend; 0: :func:`env_threads`' default."""

    def __post_init__(self) -> None:
        if self.backend not in _BACKENDS:
            raise ValueError(f"backend={self.backend!r}; accepted: {', '.join(_BACKENDS)}")
        if self.sticky is not None and not 0.0 <= self.sticky <= 1.0:
            raise ValueError(f"sticky={self.sticky}; accepted: a probability in [0, 1]")
        for name in ("frame_skip", "frame_stack", "screen_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; accepted: an integer >= 1")
        if self.noop_max < 0:
            raise ValueError(f"noop_max={self.noop_max}; accepted: an integer >= 0")
        if self.num_threads < 0:
            raise ValueError(
                f"num_threads={self.num_threads}; accepted: 0 (one per env, up to the cores "
                "in the affinity mask) or an integer >= 1"
            )

    def for_evaluation(self) -> AtariConfig:
        """The same game as seen by a score table: no clipping, whole games."""
        return replace(self, episodic_life=False, clip_rewards=False)


def env_threads(num_envs: int, threads: int = 0) -> int:
    """``threads``, or for 0 one per env up to the cores this process may run on (its
    affinity mask; ale-py's own 0 would count every core of the machine)."""
    return threads or min(num_envs, cores_available())


def _ale_vector(game: str, num_envs: int, sticky: float, cfg: AtariConfig) -> gym.vector.VectorEnv:
    from ale_py.vector_env import AtariVectorEnv

    threads = env_threads(num_envs, cfg.num_threads)
    return AtariVectorEnv(
        game,
        num_envs,
        num_threads=threads,
        repeat_action_probability=sticky,
        max_num_frames_per_episode=cfg.max_episode_frames,
        autoreset_mode="SameStep",
        img_height=cfg.screen_size,
        img_width=cfg.screen_size,
        grayscale=True,
        stack_num=cfg.frame_stack,
        frameskip=cfg.frame_skip,
        maxpool=True,
        noop_max=cfg.noop_max,
        # Life loss is tracked by VecEnv from `lives`, so the C++ env plays whole games
        # and the episode score is the real one.
        episodic_life=False,
        reward_clipping=False,
        use_fire_reset=cfg.fire_reset,
    )


class _FireOnReset(gym.Wrapper):
    """Press FIRE once after reset in games whose action set has it (Breakout needs it)."""

    def reset(self, **kwargs):  # type: ignore[override]
        obs, info = self.env.reset(**kwargs)
        meanings = self.env.unwrapped.get_action_meanings()
        if "FIRE" in meanings:
            obs, _, terminated, truncated, info = self.env.step(meanings.index("FIRE"))
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


def _gym_vector(game: str, num_envs: int, sticky: float, cfg: AtariConfig) -> gym.vector.VectorEnv:
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gym.register_envs(ale_py)
    camel = "".join(p.capitalize() for p in game.split("_"))

    def make_one() -> gym.Env:
        env = gym.make(
            f"ALE/{camel}-v5",
            frameskip=1,
            repeat_action_probability=sticky,
            max_num_frames_per_episode=cfg.max_episode_frames,
        )
        env = AtariPreprocessing(
            env, noop_max=cfg.noop_max, frame_skip=cfg.frame_skip, screen_size=cfg.screen_size
        )
        if cfg.fire_reset:
            env = _FireOnReset(env)
        return FrameStackObservation(env, cfg.frame_stack, padding_type="zero")

    return gym.vector.SyncVectorEnv(
        [make_one for _ in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def make_atari(name: str, num_envs: int, cfg: AtariConfig | None = None) -> VecEnv:
    """Build an Atari :class:`VecEnv` from any accepted name (see ``parse_env_id``)."""
    cfg = cfg or AtariConfig()
    env_id = parse_env_id(name)
    if env_id.family != "atari":
        raise ValueError(f"'{name}' is not an Atari game")
    sticky = env_id.sticky if cfg.sticky is None else cfg.sticky
    backend = "ale" if cfg.backend == "auto" else cfg.backend
    if backend == "ale":
        try:
            venv = _ale_vector(env_id.game, num_envs, sticky, cfg)
        except ImportError:
            if cfg.backend == "ale":
                raise
            venv = _gym_vector(env_id.game, num_envs, sticky, cfg)
    else:
        venv = _gym_vector(env_id.game, num_envs, sticky, cfg)
    return VecEnv(
        venv,
        clip_rewards=cfg.clip_rewards,
        episodic_life=cfg.episodic_life,
        fire_action=_fire_index(env_id.game) if cfg.fire_reset else None,
        name=env_id.game,
    )


@functools.cache
def _fire_index(game: str) -> int | None:
    """Index of FIRE in the game's minimal action set (None if it has none)."""
    from ale_py import Action, ALEInterface, LoggerMode
    from ale_py.roms import get_rom_path

    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.loadROM(get_rom_path(game))
    actions = list(ale.getMinimalActionSet())
    return actions.index(Action.FIRE) if Action.FIRE in actions else None
