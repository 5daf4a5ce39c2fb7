"""Names users type for environments, and what they mean.

Every ALE game has a short snake_case name (``breakout``, ``space_invaders``); the
gymnasium ids ``BreakoutNoFrameskip-v4`` (no sticky actions) and ``ALE/Breakout-v5``
(sticky actions 0.25) reach the same pipeline. Classic-control tasks give vector
observations for fast tests. Everything else gymnasium's registry holds (``Pendulum-v1``,
``LunarLander-v3``, an id a user's module registered, imported first with
``--env-module``) and ``package.module:factory`` entry points (a callable returning a
``gymnasium.Env``) are the ``gym`` family, built by :mod:`rlamd.envs.generic`.
"""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = [
    "EnvId",
    "atari_games",
    "classic_ids",
    "import_env_modules",
    "parse_env_id",
    "register_factory",
    "resolve_factory",
]

# Short name -> gymnasium id, for the classic-control tasks we support.
_CLASSIC = {
    "cartpole": "CartPole-v1",
    "acrobot": "Acrobot-v1",
    "mountaincar": "MountainCar-v0",
}


@dataclass(frozen=True)
class EnvId:
    """A parsed environment name."""

    family: str
    """``atari``, ``classic`` or ``gym`` (any other gymnasium id or a factory entry point)."""
    game: str
    """ALE ROM id (``breakout``), the gymnasium id (``CartPole-v1``, ``Pendulum-v1``) or
    the entry point (``package.module:factory``)."""
    sticky: float
    """Sticky-action probability implied by the id (v5: 0.25, everything else: 0)."""

    @property
    def slug(self) -> str:
        """The name as one safe file-name part (``ns/Env-v0`` -> ``ns_env-v0``)."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.game).lower()


@lru_cache(maxsize=1)
def atari_games() -> tuple[str, ...]:
    """The ROM ids ale-py ships (its wheels carry the ROMs; nothing is downloaded)."""
    from ale_py.roms import get_all_rom_ids

    return tuple(sorted(get_all_rom_ids()))


def classic_ids() -> tuple[str, ...]:
    return tuple(_CLASSIC.values())


def _snake(camel: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", camel).lower()


def _all_names() -> list[str]:
    games = atari_games()
    camel = ["".join(p.capitalize() for p in g.split("_")) for g in games]
    return [
        *games,
        *(f"{c}NoFrameskip-v4" for c in camel),
        *(f"ALE/{c}-v5" for c in camel),
        *_CLASSIC,
        *_CLASSIC.values(),
        *_gym_ids(),
    ]


def _gym_ids() -> list[str]:
    import gymnasium as gym

    return list(gym.registry)


def import_env_modules(modules: str | None) -> None:
    """Import each of the comma-separated ``modules`` (their import registers envs).

    Raises:
        ValueError: a module that does not import, with the reason, in one line.
    """
    for module in (m.strip() for m in (modules or "").split(",")):
        if not module:
            continue
        try:
            importlib.import_module(module)
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else "no detail"
            raise ValueError(
                f"train.env_module={modules!r}: importing {module} failed "
                f"({exc.__class__.__name__}: {first}); accepted: modules this Python can "
                "import (their import registers gymnasium envs)"
            ) from None


_FACTORIES: dict[str, Callable[..., Any]] = {}
"""Callables handed to ``rlamd.fit`` in this process, by the entry point naming them."""


def register_factory(factory: Callable[..., Any]) -> str:
    """Name ``factory`` (a callable returning a ``gymnasium.Env``) as an entry point.

    A function defined at the top of an importable module gets its real entry point
    (``package.module:make_env``), which other processes (Ray workers, ``rlamd.evaluate``)
    can import too. Anything else (a lambda, a local function, a callable object, a
    function of ``__main__``) is reachable in this process only.
    """
    module = getattr(factory, "__module__", None) or "__main__"
    qualname = getattr(factory, "__qualname__", None) or type(factory).__qualname__
    base = f"{module}:{qualname}"
    name, n = base, 1
    while _FACTORIES.get(name, factory) is not factory:
        n += 1
        name = f"{base}#{n}"
    _FACTORIES[name] = factory
    return name


def resolve_factory(entry: str) -> Callable[..., Any] | None:
    """The callable ``entry`` (``package.module:attr.path``) names, or None if it names
    none (no such module or attribute, or not callable)."""
    if entry in _FACTORIES:
        return _FACTORIES[entry]
    module, _, path = entry.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in path.split("."):
            obj = getattr(obj, part)
    except Exception:  # any failure at import: :func:`parse_env_id` says which
        return None
    return obj if callable(obj) and not isinstance(obj, type(importlib)) else None


def _registered_elsewhere(text: str) -> bool:
    """``text`` is a gymnasium id whose env is not one of ale-py's."""
    import gymnasium as gym

    spec = gym.registry.get(text)
    return spec is not None and not str(spec.entry_point).startswith("ale_py")


def _generic(text: str) -> EnvId | None:
    """A gymnasium id (case-insensitive; ``module:Env-v0`` imports ``module`` first) or a
    factory entry point, as the ``gym`` family; None if ``text`` is neither."""
    import gymnasium as gym

    entry = None
    if ":" in text:
        if resolve_factory(text) is not None:
            return EnvId("gym", text, 0.0)
        entry = text
        module, _, text = text.partition(":")
        if module == "__main__" or "<" in text:
            raise ValueError(_unreachable(entry))
        try:
            importlib.import_module(module)
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else "no detail"
            raise ValueError(
                f"train.env={entry!r}: importing its module {module} failed "
                f"({exc.__class__.__name__}: {first}); accepted: an entry point "
                "package.module:factory whose module this Python can import"
            ) from None
    if text in gym.registry:
        return EnvId("gym", text, 0.0)
    same = [k for k in gym.registry if k.lower() == text.lower()]
    if len(same) == 1:
        return EnvId("gym", same[0], 0.0)
    if entry is not None:
        names = [n for n, v in vars(importlib.import_module(module)).items() if callable(v)]
        close = difflib.get_close_matches(text, names, n=1)
        hint = f". Did you mean {module}:{close[0]}?" if close else ""
        raise ValueError(
            f"train.env={entry!r}: {module} has no callable {text!r}; accepted: "
            f"{module}:NAME with NAME a function that returns a gymnasium.Env{hint}"
        )
    return None


def _unreachable(entry: str) -> str:
    """Why a callable named for this process only (``rlamd.fit`` was given a lambda, a local
    function or a function of a script) cannot be made here, and what to do."""
    return (
        f"train.env={entry!r} names a callable that rlamd.fit was given in another Python "
        "process (a lambda, a local function or a function of a script), so this one "
        "cannot make the env; accepted: in Python, rlamd.load(RUN, env=<the same callable>); "
        "or train on a function at the top of an importable module (package.module:make_env), "
        "which every process can make"
    )


def parse_env_id(name: str, module: str | None = None) -> EnvId:
    """Map any accepted spelling to an :class:`EnvId`.

    Args:
        name: the env's name (see the module docstring).
        module: modules (comma-separated) to import first, so that they can register
            gymnasium envs (``--env-module``).

    Raises:
        ValueError: a module that does not import, or an unknown name; the message lists
            the closest valid names.
    """
    import_env_modules(module)
    text = name.strip()
    lowered = text.lower()
    if lowered in _CLASSIC:
        return EnvId("classic", _CLASSIC[lowered], 0.0)
    for gym_id in _CLASSIC.values():
        if lowered == gym_id.lower():
            return EnvId("classic", gym_id, 0.0)
    if _registered_elsewhere(text):  # e.g. gymnasium's Blackjack-v1, not ALE's Blackjack
        return EnvId("gym", text, 0.0)
    games = set(atari_games())
    sticky = 0.0
    base = text
    m = re.fullmatch(r"(?:ALE/)?([A-Za-z0-9]+?)(NoFrameskip|Deterministic)?-v(\d)", text)
    if m:
        base = m.group(1)
        sticky = 0.25 if m.group(3) == "5" else 0.0
    candidate = _snake(base) if base != base.lower() else base.lower()
    for option in (candidate, candidate.replace("_", ""), lowered.replace("-", "_")):
        if option in games:
            return EnvId("atari", option, sticky)
    # ROMs such as "mspacman" vs "ms_pacman": compare without underscores.
    squashed = {g.replace("_", ""): g for g in games}
    if candidate.replace("_", "") in squashed:
        return EnvId("atari", squashed[candidate.replace("_", "")], sticky)
    generic = _generic(text)
    if generic is not None:
        return generic
    close = difflib.get_close_matches(text, _all_names(), n=5, cutoff=0.5)
    if not close:
        close = difflib.get_close_matches(candidate, sorted(games), n=5, cutoff=0.4)
    hint = f" Closest valid names: {', '.join(close)}." if close else ""
    raise ValueError(
        f"Unknown environment '{name}'. Accepted: an ALE game in snake_case "
        f"(e.g. breakout, space_invaders; {len(games)} games), a gymnasium Atari id "
        f"(BreakoutNoFrameskip-v4, ALE/Breakout-v5), a classic task "
        f"({', '.join(_CLASSIC)}), any id in gymnasium's registry (e.g. Pendulum-v1; "
        f"--env-module MODULE imports a module that registers more) or an entry point "
        f"package.module:factory.{hint}"
    )
