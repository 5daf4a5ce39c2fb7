"""Names users type for environments, and what they mean.

Every ALE game has a short snake_case name (``breakout``, ``space_invaders``); the
gymnasium ids ``BreakoutNoFrameskip-v4`` (no sticky actions) and ``ALE/Breakout-v5``
(sticky actions 0.25) reach the same pipeline. Classic-control tasks give vector
observations for fast tests.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["EnvId", "atari_games", "classic_ids", "parse_env_id"]

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
    """``atari`` or ``classic``."""
    game: str
    """ALE ROM id (``breakout``) or the gymnasium id of a classic task (``CartPole-v1``)."""
    sticky: float
    """Sticky-action probability implied by the id (v5: 0.25, everything else: 0)."""


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
    ]


def parse_env_id(name: str) -> EnvId:
    """Map any accepted spelling to an :class:`EnvId`.

    Raises:
        ValueError: unknown name; the message lists the closest valid names.
    """
    text = name.strip()
    lowered = text.lower()
    if lowered in _CLASSIC:
        return EnvId("classic", _CLASSIC[lowered], 0.0)
    for gym_id in _CLASSIC.values():
        if lowered == gym_id.lower():
            return EnvId("classic", gym_id, 0.0)
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
    close = difflib.get_close_matches(text, _all_names(), n=5, cutoff=0.5)
    if not close:
        close = difflib.get_close_matches(candidate, sorted(games), n=5, cutoff=0.4)
    hint = f" Closest valid names: {', '.join(close)}." if close else ""
    raise ValueError(
        f"Unknown environment '{name}'. Accepted: an ALE game in snake_case "
        f"(e.g. breakout, space_invaders; {len(games)} games), a gymnasium Atari id "
        f"(BreakoutNoFrameskip-v4, ALE/Breakout-v5) or a classic task "
        f"({', '.join(_CLASSIC)}).{hint}"
    )
