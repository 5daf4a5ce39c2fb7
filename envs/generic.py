"""Any gymnasium env as a vector env: registry ids, ``--env-module`` ids, factory entry points.

Each env is made by ``gymnasium.make`` (ids) or by calling the factory, then converted
(:mod:`rlamd.envs.spaces`: observations to float32 vectors or uint8 channels-first images,
with grayscale, resize and frame stack as settings; actions checked), and optionally cut
by a ``TimeLimit``. ``num_envs`` of them step in gymnasium's ``SyncVectorEnv`` (default: in
turn, in this process: the fastest for cheap envs) or ``AsyncVectorEnv`` (a process per
env, for envs whose step is expensive), both in same-step autoreset mode, which is what
:class:`rlamd.envs.vector.VecEnv` wraps.

gymnasium's env checker runs once per env and process, in :func:`probe_env`, with its
warnings recorded (never raised, whatever the warning filters say) and kept as notes for
the run's log; the envs that train run without it.
"""

from __future__ import annotations

import functools
import inspect
import multiprocessing
import signal
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym

from .checks import CheckedEnv
from .registry import parse_env_id, resolve_factory
from .spaces import ActionInfo, ObsTransform, action_info, is_image_space
from .vector import VecEnv
from .wrappers import FrameRecorder, StackFrames, TransformObs

__all__ = [
    "VECTOR_MODES",
    "EnvConfig",
    "EnvProbe",
    "env_family",
    "env_notes",
    "env_spaces",
    "make_generic",
    "probe_env",
    "render_problem",
    "spaces_mismatch",
]

VECTOR_MODES = ("auto", "sync", "async")


@dataclass(frozen=True)
class EnvConfig:
    """How a gymnasium env that is not Atari is built and stepped."""

    vector: str = "auto"
    """sync (the envs step in turn in this process), async (a process per env, gymnasium's
    AsyncVectorEnv: for envs whose step is slow) or auto (sync)."""
    frame_stack: int = 1
    """Image observations: stack the last k frames along the channels (1: no stack)."""
    grayscale: bool = False
    """Image observations: RGB frames to one gray channel."""
    resize: int = 0
    """Image observations: resize frames to N x N pixels (0: keep their size)."""
    max_episode_steps: int | None = None
    """Cut episodes after this many steps (none: the env's own limit, if it has one)."""
    step_timeout: float = 120.0
    """vector=async: seconds one step may take before the run stops naming the env that
    hung (0: wait forever)."""
    eval_max_steps: int | None = None
    """Cut evaluation episodes after this many steps, and say so (none: the env's own
    limit where it has one, else 27000)."""
    max_skipped_updates: int = 1000
    """Stop the run, with a checkpoint, once this many learner updates were skipped for
    non-finite values (as NaN observations or rewards cause) in log intervals where most
    updates were skipped (0: never)."""

    def __post_init__(self) -> None:
        if self.vector not in VECTOR_MODES:
            raise ValueError(f"vector={self.vector!r}; accepted: {', '.join(VECTOR_MODES)}")
        if self.frame_stack < 1:
            raise ValueError(f"frame_stack={self.frame_stack}; accepted: an integer >= 1")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ValueError(
                f"max_episode_steps={self.max_episode_steps}; accepted: an integer >= 1, or none"
            )
        if self.eval_max_steps is not None and self.eval_max_steps < 1:
            raise ValueError(
                f"eval_max_steps={self.eval_max_steps}; accepted: an integer >= 1, or none"
            )
        if self.step_timeout < 0:
            raise ValueError(
                f"step_timeout={self.step_timeout}; accepted: seconds > 0, or 0 (wait forever)"
            )


def _make_raw(game: str, render: bool) -> gym.Env:
    """One env as its maker builds it: ``gym.make`` for ids (without the env checker,
    which :func:`probe_env` runs once), the factory's call otherwise (given
    ``render_mode="rgb_array"`` when asked for and its signature takes it)."""
    mode = {"render_mode": "rgb_array"} if render else {}
    factory = resolve_factory(game) if ":" in game else None
    if factory is None:
        return gym.make(game, disable_env_checker=True, **mode)
    if render:
        try:
            params = inspect.signature(factory).parameters
        except (TypeError, ValueError):
            params = {}
        takes = "render_mode" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
        if not takes:
            mode = {}
    env = factory(**mode)
    if not isinstance(env, gym.Env):
        raise ValueError(
            f"the factory {game} returned {type(env).__name__}; accepted: a callable returning "
            "a gymnasium.Env"
        )
    return env


def _build_one(
    game: str,
    cfg: EnvConfig,
    render: bool = False,
    recorders: list | None = None,
    index: int = 0,
) -> gym.Env:
    """One env (``index`` of its vector env), checked (:class:`rlamd.envs.checks.CheckedEnv`)
    and converted as the module docstring says (warnings recorded, not raised)."""
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        env = CheckedEnv(_make_raw(game, render), game, index)
    if cfg.max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, cfg.max_episode_steps)
    if recorders is not None:
        env = FrameRecorder(env)
        recorders.append(env)
    action_info(env.action_space)  # refuses what the agents cannot act in
    transform = ObsTransform(env.observation_space, grayscale=cfg.grayscale, resize=cfg.resize)
    if not transform.identity:
        env = TransformObs(env, transform)
    if transform.kind == "image" and cfg.frame_stack > 1:
        env = StackFrames(env, cfg.frame_stack)
    return env


def make_generic(
    name: str,
    num_envs: int,
    cfg: EnvConfig | None = None,
    *,
    module: str | None = None,
    render: bool = False,
) -> VecEnv:
    """``num_envs`` copies of any gymnasium env (see the module docstring) as a :class:`VecEnv`.

    Args:
        name: a gymnasium id or a ``package.module:factory`` entry point.
        cfg: image conversions, the vector mode, a step limit.
        module: modules to import first (``--env-module``).
        render: env 0 renders ``rgb_array`` frames into ``VecEnv.recorder`` (``evaluate
            --video``); the envs then step in this process whatever ``cfg.vector`` says.

    Raises:
        ValueError: an unknown name, a factory that returns no env, or a space rlamd
            cannot train on (:class:`rlamd.envs.spaces.UnsupportedSpace`), in one line.
    """
    cfg = cfg or EnvConfig()
    game = parse_env_id(name, module).game
    recorders: list[FrameRecorder] = []
    fns = [
        functools.partial(
            _build_one, game, cfg, render and not i, recorders if render and not i else None, i
        )
        for i in range(num_envs)
    ]
    mode = gym.vector.AutoresetMode.SAME_STEP
    if cfg.vector == "async" and not render:
        workers = [functools.partial(_in_worker, fn) for fn in fns]
        venv: gym.vector.VectorEnv = gym.vector.AsyncVectorEnv(workers, autoreset_mode=mode)
    else:
        venv = gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
    space = venv.single_observation_space
    # A replay stores stacked frames apart when each frame is one channel (docs/ARCHITECTURE.md, rule 3).
    one_channel = space.dtype == "uint8" and space.shape[0] == cfg.frame_stack
    return VecEnv(
        venv,
        name=game,
        frame_stack=cfg.frame_stack if one_channel else 1,
        recorder=recorders[0] if recorders else None,
        step_timeout=cfg.step_timeout or None,
    )


def _in_worker(build: Callable[[], gym.Env]) -> gym.Env:
    """An ``AsyncVectorEnv`` worker's env. The worker ignores Ctrl-C (the terminal sends it
    to the whole process group): the main process decides how a run stops, and a worker
    that died of it would end the run with its traceback. (gymnasium also makes one env in
    the main process, to read the spaces: that one keeps the handler.)"""
    if multiprocessing.parent_process() is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return build()


@dataclass(frozen=True)
class EnvProbe:
    """What one env of a name is, found by making it once."""

    observation_space: gym.Space
    """The env's own observation space (before rlamd's conversions)."""
    action_space: gym.Space
    """The env's own action space."""
    actions: ActionInfo
    """The action space as the agents see it."""
    image: bool
    """Image observations (the CNN)."""
    notes: tuple[str, ...]
    """Warnings gymnasium's env checker gave (recorded, never raised)."""
    max_episode_steps: int | None = None
    """The env's own time limit (a ``TimeLimit`` its maker put on it), None without one."""


@functools.lru_cache(maxsize=32)
def probe_env(name: str, module: str | None = None) -> EnvProbe:
    """Make one env of ``name``, check its spaces, run gymnasium's passive env checker on
    a reset and a step, and say what it is. Cached per process.

    The checker's warnings and failed assertions become notes: gymnasium's own ``make``
    would stop at some of them, but an env that trains should not be refused for them.

    Raises:
        UnsupportedSpace: a space rlamd cannot train on.
        ValueError: the env cannot be made, reset or stepped (a missing dependency, a
            factory that fails), in one line.
    """
    game = parse_env_id(name, module).game
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            env = _make_raw(game, render=False)
        except Exception as exc:
            raise _unmade(name, exc) from None
    try:
        obs_space, act_space = env.observation_space, env.action_space
        actions = action_info(act_space)
        ObsTransform(obs_space)  # refuses what the networks cannot take
        notes = _checked(name, env, caught)
        limit = _own_limit(env)
    finally:
        env.close()
    return EnvProbe(obs_space, act_space, actions, is_image_space(obs_space), notes, limit)


def _own_limit(env: gym.Env) -> int | None:
    """The step limit of the outermost ``TimeLimit`` around ``env``, if any."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            return int(env._max_episode_steps)
        env = env.env
    return None


def _unmade(name: str, exc: Exception) -> ValueError:
    first = str(exc).splitlines()[0] if str(exc) else "no detail"
    return ValueError(f"train.env={name!r} could not be made ({exc.__class__.__name__}: {first})")


def _checked(name: str, env: gym.Env, caught: list) -> tuple[str, ...]:
    """gymnasium's passive checks on ``env`` (a reset and a step), as notes; then the same
    reset and step without them, which must work."""
    from gymnasium.utils import passive_env_checker as check

    notes = [str(w.message) for w in caught]
    action = env.action_space.sample()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for fn, args in (
            (check.check_observation_space, (env.observation_space,)),
            (check.check_action_space, (env.action_space,)),
            (check.env_reset_passive_checker, (env,)),
            (check.env_step_passive_checker, (env, action)),
        ):
            try:
                fn(*args)
            except AssertionError as exc:
                notes.append(str(exc))
            except Exception:
                pass  # the plain reset and step below say what is wrong
        try:
            env.reset(seed=0)
            env.step(action)
        except Exception as exc:
            raise _unmade(name, exc) from None
    notes += [str(w.message) for w in seen]
    return tuple(dict.fromkeys(f"gymnasium's env checker: {n.splitlines()[0]}" for n in notes))


def env_spaces(name: str, module: str | None = None) -> dict[str, str] | None:
    """The spaces env ``name`` has, as a checkpoint keeps them (None for Atari, whose
    pipeline fixes them)."""
    if parse_env_id(name, module).family == "atari":
        return None
    probe = probe_env(name, module)
    return {"observation": str(probe.observation_space), "action": str(probe.action_space)}


def spaces_mismatch(saved: dict[str, str] | None, name: str, module: str | None) -> str | None:
    """What differs between the spaces a checkpoint kept (``saved``) and those env ``name``
    has now (None: the same, or nothing was kept)."""
    now = env_spaces(name, module) if saved else None
    if not saved or not now:
        return None
    for kind in ("observation", "action"):
        if saved.get(kind, now[kind]) != now[kind]:
            return f"its {kind} space is {now[kind]}, but the checkpoint's was {saved[kind]}"
    return None


def env_notes(name: str, module: str | None = None) -> tuple[str, ...]:
    """What gymnasium's env checker said of env ``name`` (nothing for Atari)."""
    if parse_env_id(name, module).family == "atari":
        return ()
    return probe_env(name, module).notes


def env_family(name: str, module: str | None = None) -> str:
    """The preset family of an env: ``atari``, ``classic`` (discrete actions, vector
    observations: classic control and any such gymnasium env), ``continuous`` (``Box``
    actions) or ``pixels`` (discrete actions, image observations)."""
    parsed = parse_env_id(name, module)
    if parsed.family != "gym":
        return parsed.family
    probe = probe_env(name, module)
    if probe.actions.continuous:
        return "continuous"
    return "pixels" if probe.image else "classic"


def render_problem(
    name: str, module: str | None = None, cfg: EnvConfig | None = None
) -> str | None:
    """Why env ``name`` cannot draw ``rgb_array`` frames, in a few words; None if it can.

    Makes one env with ``render_mode="rgb_array"``, resets it and renders once.
    """
    game = parse_env_id(name, module).game
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            env = _build_one(game, cfg or EnvConfig(), render=True, recorders=[])
    except Exception as exc:
        return f"it could not be made to render ({exc.__class__.__name__}: {exc})"
    try:
        if env.unwrapped.render_mode != "rgb_array":
            return (
                f"it was made with render_mode={env.unwrapped.render_mode!r}, not 'rgb_array' "
                "(a factory must pass render_mode on to the env)"
            )
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            env.reset(seed=0)
        recorder = env
        while not isinstance(recorder, FrameRecorder):
            recorder = recorder.env
        return recorder.failed
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else "no detail"
        return f"render() failed ({exc.__class__.__name__}: {first})"
    finally:
        env.close()
