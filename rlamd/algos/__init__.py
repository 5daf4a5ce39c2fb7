"""The training algorithms, chosen once by name from :data:`ALGORITHMS`.

An algorithm is a plugin: an object that satisfies :class:`rlamd.algos.base.Algorithm`
(its config section, presets, checks, agent, loop, capture site and Ray halves), made
choosable by :func:`register`. The built-in ones register below, one line each; one from
outside the library registers itself in its own module, which rlamd imports from

* ``RLAMD_PLUGINS=MODULE[:FUNCTION],...`` (each module is imported, then ``FUNCTION``,
  when named, is called), or
* an installed package's entry point in the ``rlamd.algorithms`` group (its object is
  loaded, and called when it is a function),

when this package is first imported, so every command (``python -m rlamd.train``,
``rlamd.evaluate``, ``--help``) and ``rlamd.fit`` sees them (docs/ARCHITECTURE.md,
Algorithms). A plugin that fails to load never breaks an import: every lookup of an
algorithm then refuses with one line naming it.
"""

from __future__ import annotations

import importlib
import os
from importlib.metadata import entry_points

from rlamd.checkpoint import CheckpointError
from rlamd.config import ConfigError, bad_setting
from rlamd.config.errors import closest
from rlamd.config.sections import register_section, unregister_section
from rlamd.envs import make_env

from .base import Algorithm
from .dqn import DQN_ALGORITHM
from .ppo import PPO_ALGORITHM
from .sac import SAC_ALGORITHM
from .td3 import TD3_ALGORITHM

__all__ = [
    "ALGORITHMS",
    "PLUGINS_VARIABLE",
    "Algorithm",
    "build_agent",
    "get_algorithm",
    "load_plugins",
    "register",
    "unregister",
    "which",
]

ALGORITHMS: dict[str, Algorithm] = {}
"""Every algorithm a run may choose (``train.algo``), by name, in registration order."""

PLUGINS_VARIABLE = "RLAMD_PLUGINS"
"""The environment variable naming plugin modules (``MODULE[:FUNCTION]``, comma-separated)."""
ENTRY_POINTS = "rlamd.algorithms"
"""The entry-point group of installed plugins."""

_plugin_errors: list[str] = []


def register(algorithm: Algorithm) -> Algorithm:
    """Make ``algorithm`` choosable as ``--algo NAME``: :data:`ALGORITHMS`, and its
    ``config`` as the run's section ``NAME`` (``cfg.NAME``, ``[NAME]``, ``--set NAME.KEY``,
    ``--help``, checkpoints). Registering the same object again does nothing.

    Raises:
        ValueError: another algorithm has the name, or the name cannot be a section.
    """
    name = algorithm.name
    taken = ALGORITHMS.get(name)
    if taken is algorithm:
        return algorithm
    if taken is not None:
        raise ValueError(f"algorithm {name!r} is registered already ({type(taken).__qualname__})")
    register_section(name, algorithm.config, getattr(algorithm, "moved_keys", None))
    ALGORITHMS[name] = algorithm
    return algorithm


def unregister(name: str) -> None:
    """Take back :func:`register` (a plugin reloaded, a test cleaning up)."""
    if ALGORITHMS.pop(name, None) is not None:
        unregister_section(name)


register(DQN_ALGORITHM)
register(PPO_ALGORITHM)
register(SAC_ALGORITHM)
register(TD3_ALGORITHM)


def _load(label: str, load) -> None:
    try:
        target = load()
        if callable(target) and not isinstance(target, type):
            target()
    except Exception as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        _plugin_errors.append(
            f"{label} did not load ({type(exc).__name__}: {text}); accepted: importable "
            "modules that call rlamd.algos.register, as MODULE or MODULE:FUNCTION"
        )


def _import(spec: str):
    module, _, function = spec.partition(":")
    loaded = importlib.import_module(module.strip())
    return getattr(loaded, function.strip()) if function.strip() else None


def load_plugins(spec: str | None = None, *, installed: bool = True) -> None:
    """Import the plugin modules ``spec`` names (default: :data:`PLUGINS_VARIABLE`) and,
    with ``installed``, the entry points of :data:`ENTRY_POINTS`. A failure is kept and
    said by :func:`get_algorithm`, never raised here."""
    spec = os.environ.get(PLUGINS_VARIABLE, "") if spec is None else spec
    seen: set[str] = set()  # one plugin named twice (the variable and its entry point) loads once
    for item in (s.strip() for s in spec.split(",")):
        if item and _first(item, seen):
            _load(f"{PLUGINS_VARIABLE}={item}", lambda item=item: _import(item))
    if installed:
        for ep in entry_points(group=ENTRY_POINTS):
            try:
                spec = f"{ep.module}:{ep.attr or ''}"
            except AttributeError:  # a value that is no MODULE[:ATTR]: _load says so
                spec = ep.value
            if _first(spec, seen):
                _load(f"entry point {ep.name} = {ep.value} ({ENTRY_POINTS})", ep.load)


def _first(spec: str, seen: set[str]) -> bool:
    """Whether ``MODULE[:FUNCTION]`` is new to ``seen`` (and now in it)."""
    module, _, function = spec.partition(":")
    key = f"{module.strip()}:{function.strip()}"
    new = key not in seen
    seen.add(key)
    return new


def which(*takes: str, on_ray: bool = False) -> str:
    """The registered algorithms whose policies take all of ``takes`` (and that train on
    Ray, with ``on_ray``), as ``a, b or c``: a refusal's accepted list. A plugin that does
    not say what it takes (``takes``, ``on_ray``) is left out."""
    names = [
        name
        for name, algo in ALGORITHMS.items()
        if set(takes) <= getattr(algo, "takes", frozenset())
        and (getattr(algo, "on_ray", False) or not on_ray)
    ]
    if len(names) < 2:
        return names[0] if names else "none registered"
    return f"{', '.join(names[:-1])} or {names[-1]}"


def get_algorithm(name: str) -> Algorithm:
    """The algorithm called ``name``, or a ConfigError naming the accepted ones (or the
    plugin that failed to load)."""
    if _plugin_errors:
        raise ConfigError(_plugin_errors[0])
    try:
        return ALGORITHMS[name]
    except KeyError:
        close = closest(name, ALGORITHMS)
        accepted = (
            f"{', '.join(ALGORITHMS)}, or one a plugin registers "
            f"({PLUGINS_VARIABLE}=MODULE, docs/ARCHITECTURE.md, Algorithms)"
        )
        raise bad_setting(
            "train", "algo", name, accepted, close=repr(close) if close else None
        ) from None


def build_agent(cfg, device, env=None, agent_state: dict | None = None, log=None):
    """The run's agent on ``device`` (its weights from ``agent_state`` when given).

    ``env`` tells the observation and action spaces; without one, a one-env copy of the
    run's env is made and closed.
    """
    own = env is None
    if own:
        env = make_env(
            cfg.train.env,
            num_envs=1,
            atari=cfg.atari,
            module=cfg.train.env_module,
            env_cfg=cfg.env,
        )
    try:
        agent = get_algorithm(cfg.train.algo).build_agent(cfg, device, env, log)
    finally:
        if own:
            env.close()
    if agent_state is not None:
        try:
            agent.load_state_dict(agent_state)
        except (KeyError, ValueError, TypeError, RuntimeError) as exc:
            text = " ".join(str(exc).split()) or repr(exc)
            if isinstance(exc, RuntimeError) and "state_dict" not in text and "size" not in text:
                raise  # not a mismatch (a GPU error, say): the caller explains those
            text = text if len(text) <= 240 else text[:237] + "..."
            raise CheckpointError(
                f"the checkpoint's {cfg.train.algo} agent does not fit the network these "
                f"settings build ({text.rstrip(':. ')}); resume with the checkpoint's "
                "settings, or start a new run"
            ) from None
    return agent


load_plugins()
