"""The Python API: :func:`fit` trains as ``python -m rlamd.train`` does, :func:`load` gives
back a policy for a user's own loop.

Example::

    import gymnasium as gym
    import rlamd

    run = rlamd.fit("Pendulum-v1", algo="ppo", steps=100_000, settings={"ppo.lr": 1e-3})
    print(run.run_dir, run.final_eval.mean)

    policy = rlamd.load(run.run_dir)          # on the CPU, deterministic
    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(policy.act(obs))

``fit`` builds its :class:`rlamd.config.sections.RunConfig` through
:func:`rlamd.config.layers.resolve` (the presets and every check of the command line
apply) and drives the same runner (:func:`rlamd.runner.run`): the run folder, logs,
evaluations and checkpoint are the command line's. ``rlamd/__init__.py`` exposes
``rlamd.fit`` and ``rlamd.load`` lazily (docs/ARCHITECTURE.md, Layers).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlamd.algos import build_agent, get_algorithm
from rlamd.checkpoint import find_checkpoint, load_checkpoint
from rlamd.config.errors import ConfigError
from rlamd.config.layers import resolve
from rlamd.config.sections import ALGORITHM_SECTIONS, RunConfig
from rlamd.config.sources import parse_set
from rlamd.device import resolve_device
from rlamd.envs import ObsTransform, make_env, parse_env_id, probe_env, register_factory
from rlamd.envs.checks import describe_value
from rlamd.evaluate import eval_seed, evaluate_episodes
from rlamd.rundir import claim
from rlamd.runner import run
from rlamd.runner import run_name as folder_name

__all__ = ["EvalResult", "Policy", "Run", "fit", "load"]

EnvLike = str | Callable[..., Any]
"""An env name (anything ``python -m rlamd.train`` takes) or a callable returning a
``gymnasium.Env``."""


@dataclass(frozen=True)
class EvalResult:
    """Scores of whole evaluation episodes."""

    mean: float
    """Mean score."""
    std: float
    """Population standard deviation of the scores."""
    scores: tuple[float, ...]
    """Each episode's score."""
    note: str = ""
    """What else the evaluation said: episodes a step cap cut, or fewer episodes than asked
    (mean and std are NaN when none ended)."""


@dataclass(frozen=True)
class Run:
    """What :func:`fit` trained."""

    run_dir: Path
    """The run folder (``checkpoint.pt``, ``config.toml``, logs)."""
    config: RunConfig
    """The resolved settings."""
    status: int
    """The runner's exit status: 0 done, 128 + N stopped by signal N."""
    final_eval: EvalResult | None
    """The final policy's evaluation (``train.eval_episodes`` episodes; None when stopped)."""


def _env_name(env: EnvLike) -> str:
    if isinstance(env, str):
        return env
    if not callable(env):
        raise ConfigError(
            f"env={type(env).__name__} object; accepted: an env id (e.g. 'Pendulum-v1') or a "
            "callable returning a gymnasium.Env (e.g. lambda: gym.make(...)): every env of the "
            "run is made by it"
        )
    return register_factory(env)


def _layers(settings: Mapping[str, Any] | None, train: dict[str, Any]) -> dict[str, dict]:
    """``{"ppo.lr": 3e-4, "steps": 5000}`` -> ``{"ppo": {"lr": 3e-4}, "train": {...}}``, the
    keys checked as ``--set`` checks them (sections, bare keys), the values kept as given;
    a section may also hold a mapping, as its TOML table would: ``{"ppo": {"lr": 3e-4}}``."""
    if settings is not None and not isinstance(settings, Mapping):
        raise ConfigError(
            f"settings={type(settings).__name__} {str(settings)[:60]}; accepted: a mapping of "
            "setting names to values, e.g. settings={'ppo.lr': 3e-4, 'env.vector': 'async'}"
        )
    layers: dict[str, dict[str, Any]] = {"train": dict(train)}
    defaults = RunConfig().sections()
    flat: dict[str, Any] = {}
    for key, value in (settings or {}).items():
        if key in defaults and isinstance(value, Mapping):
            flat.update({f"{key}.{name}": v for name, v in value.items()})
        else:
            flat[key] = value
    algo = next((str(flat[k]) for k in ("train.algo", "algo") if k in flat), train.get("algo"))
    for key, value in flat.items():
        ((section, names),) = parse_set(
            [f"{key}=0"], defaults, algo=algo, algorithms=ALGORITHM_SECTIONS
        ).items()
        layers.setdefault(section, {})[next(iter(names))] = value
    return layers


def fit(
    env: EnvLike,
    algo: str = "ppo",
    steps: int | None = None,
    *,
    settings: Mapping[str, Any] | None = None,
    logdir: str | Path = "runs",
    run_name: str | None = None,
    seed: int | None = None,
    device: str | None = None,
    env_module: str | None = None,
) -> Run:
    """Train ``algo`` on ``env`` and evaluate the final policy.

    Args:
        env: an env name (``"Pendulum-v1"``, ``"cartpole"``, ``"breakout"``,
            ``"package.module:make_env"``) or a callable returning a ``gymnasium.Env``
            (a function at the top of an importable module can also be resumed and
            evaluated from other processes; a lambda only in this one).
        algo: a registered algorithm (a key of ``rlamd.algos.ALGORITHMS``: ``dqn``,
            ``ppo``, ``sac``, ``td3`` and any a plugin registers).
        steps: env steps (default: the env family's preset).
        settings: any setting, as ``--set`` names it: ``{"ppo.lr": 3e-4, "env.vector":
            "async"}``, or by section as a TOML table holds it: ``{"ppo": {"lr": 3e-4}}``;
            they win over the arguments above.
        logdir, run_name, seed, device, env_module: as the command line's flags.

    Returns:
        A :class:`Run` with the run folder and the final evaluation.

    Raises:
        rlamd.config.errors.ConfigError: a setting that is refused (before any work).
    """
    given = {"env": _env_name(env), "algo": algo, "logdir": str(logdir)}
    optional = {
        "steps": steps,
        "run_name": run_name,
        "seed": seed,
        "device": device,
        "env_module": env_module,
    }
    given.update({k: v for k, v in optional.items() if v is not None})
    cfg = resolve(_layers(settings, given))
    folder = claim(cfg.train.logdir, folder_name(cfg.train))
    run_dir = folder.path
    status = run(cfg, None, folder)
    final = _final_eval(run_dir) if status == 0 else None
    return Run(run_dir, cfg, status, final)


def _final_eval(run_dir: Path) -> EvalResult:
    """The checkpoint's policy over ``train.eval_episodes`` whole episodes, as the run's
    own evaluations play them."""
    state = load_checkpoint(find_checkpoint(run_dir))
    cfg = RunConfig.from_dict(state["config"])
    device = resolve_device(cfg.train.device)
    agent = build_agent(cfg, device, agent_state=state["agent"])
    played = evaluate_episodes(
        get_algorithm(cfg.train.algo).policy(agent, cfg),
        cfg.train.env,
        cfg.train.eval_episodes,
        device=device,
        seed=eval_seed(cfg.train.seed, int(state["step"])),
        atari=cfg.atari,
        module=cfg.train.env_module,
        env_cfg=cfg.env,
    )
    scores, nan = played.scores, float("nan")
    mean = statistics.fmean(scores) if scores else nan
    std = statistics.pstdev(scores) if scores else nan
    return EvalResult(mean, std, tuple(scores), played.remarks())


class Policy:
    """A trained agent acting on one observation at a time, in the env's own terms.

    :meth:`act` takes what the env's ``reset``/``step`` return (vectors of any dtype,
    ``Discrete`` integers, ``H x W x C`` images; Atari: the preprocessed stack rlamd's
    Atari env returns) and gives what its ``step`` takes (an ``int`` with ``Discrete``'s
    ``start`` added, or an array of the ``Box``'s shape and dtype, clipped to its bounds).
    With ``env.frame_stack`` > 1 it stacks the frames itself: call :meth:`reset` when an
    episode starts. Observation statistics saved with the agent (``ppo.norm_obs``) apply.
    """

    def __init__(self, agent: Any, cfg: RunConfig, device: torch.device) -> None:
        self.agent, self.cfg, self.device = agent, cfg, device
        self._algo = get_algorithm(cfg.train.algo)
        train, e = cfg.train, cfg.env
        self._transform: ObsTransform | None = None
        self._stack_k = 1
        if parse_env_id(train.env, train.env_module).family == "atari":
            env = make_env(train.env, num_envs=1, atari=cfg.atari)
            self.actions, self.observation_space = env.actions, env.single_observation_space
            env.close()
        else:
            probe = probe_env(train.env, train.env_module)
            self._transform = ObsTransform(
                probe.observation_space, grayscale=e.grayscale, resize=e.resize
            )
            self.actions, self.observation_space = probe.actions, probe.observation_space
            self._stack_k = e.frame_stack if self._transform.kind == "image" else 1
        self._stack: np.ndarray | None = None

    def reset(self) -> None:
        """Forget the stacked frames (at the start of an episode)."""
        self._stack = None

    def _check(self, obs: Any) -> None:
        """``obs`` is one observation of the env's space, or a :class:`ValueError` says what
        was given and what :meth:`act` takes."""
        space = self.observation_space
        takes = f"accepted: one observation of the env's {_described(space)}"
        if isinstance(obs, tuple) and len(obs) == 2 and isinstance(obs[1], dict):
            raise ValueError(
                "policy.act got an (observation, info) tuple, as reset() returns it; "
                f"{takes}: obs, info = env.reset(); policy.act(obs)"
            )
        if isinstance(space, gym.spaces.Discrete):
            if np.ndim(obs) != 0 or not np.issubdtype(np.asarray(obs).dtype, np.integer):
                raise ValueError(f"policy.act got {describe_value(obs)}; {takes} (one integer)")
            return
        try:
            x = np.asarray(obs)
        except ValueError:
            raise ValueError(f"policy.act got {describe_value(obs)}; {takes}") from None
        if x.shape != space.shape:
            batch = x.ndim == len(space.shape) + 1 and x.shape[1:] == space.shape
            what = f"a batch of {x.shape[0]} observations" if batch else f"shape {x.shape}"
            more = " (call it once per observation)" if batch else ""
            raise ValueError(f"policy.act got {what}; {takes}{more}")
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            raise ValueError(f"policy.act got an observation holding NaN or inf; {takes}")

    def _prepare(self, obs: Any) -> torch.Tensor:
        self._check(obs)
        x = np.asarray(obs) if self._transform is None else self._transform(obs)
        if self._stack_k > 1:
            if self._stack is None:
                self._stack = np.zeros((self._stack_k * x.shape[0], *x.shape[1:]), x.dtype)
            c = x.shape[0]
            self._stack[:-c] = self._stack[c:].copy()
            self._stack[-c:] = x
            x = self._stack
        return torch.as_tensor(np.ascontiguousarray(x), device=self.device)[None]

    @torch.no_grad()
    def act(self, obs: Any, deterministic: bool = True) -> Any:
        """The action for one unbatched observation (``deterministic``: the most likely
        action, a Gaussian's mean, DQN with epsilon 0; else as the agent explores when
        evaluated).

        Raises:
            ValueError: ``obs`` is not one finite observation of the env's space (a batch,
                reset()'s ``(obs, info)`` tuple, another shape), naming what ``act`` takes.
        """
        policy = self._algo.policy(self.agent, self.cfg, deterministic=deterministic)
        action = policy(self._prepare(obs))[0].cpu().numpy()
        info = self.actions
        if not info.continuous:
            return int(action) + info.start
        clipped = np.clip(action.reshape(-1), info.low, info.high)
        return clipped.reshape(info.shape).astype(info.dtype)


def _described(space: gym.Space) -> str:
    text = str(space)
    return f"observation_space {text if len(text) <= 80 else text[:77] + '...'}"


def load(
    run: str | Path, device: str = "cpu", *, env: EnvLike | None = None, logdir: str = "runs"
) -> Policy:
    """The policy of a run's checkpoint, rebuilt on ``device`` (the CPU by default).

    Args:
        run: a run folder, its ``checkpoint.pt``, or a run name under ``logdir``.
        device: where the policy computes (``cpu``, ``cuda``, ``hip``, ``auto``...).
        env: the env to use instead of the run's own name: needed in another process
            when the run trained on a callable that is not importable by name (a lambda).

    Raises:
        rlamd.checkpoint.CheckpointError: no readable checkpoint there.
        ValueError: the run's env cannot be made here (with what to pass as ``env``).
    """
    state = load_checkpoint(
        find_checkpoint(run, logdir), advice="load another checkpoint or train a new one"
    )
    saved = state["config"]
    # the precision that suits this device (a GPU run's fp16 cannot act on a CPU)
    train = {**saved["train"], "precision": "auto"}
    if env is not None:
        train["env"] = _env_name(env)
    saved = {**saved, "train": train}
    try:
        cfg = RunConfig.from_dict(saved)
    except ConfigError as exc:
        raise ValueError(
            f"{exc}. The run's env cannot be made in this process; pass it: "
            "rlamd.load(run, env=...) with the env id or the callable that made it"
        ) from None
    torch_device = resolve_device(device)
    agent = build_agent(cfg, torch_device, agent_state=state["agent"])
    return Policy(agent, cfg, torch_device)
