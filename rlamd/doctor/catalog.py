"""The known errors, read from the data files in ``rlamd/doctor/errors/`` (one per layer).

Each file holds ``[[error]]`` blocks::

    [[error]]
    key = "gpu_hang"                      # stable identifier (JSON output, tests)
    title = "The GPU hung and the driver reset it (ring timeout)"
    rank = 50                             # optional: lower answers first (default 50)
    patterns = ['ring \\S+ timeout']      # regular expressions, case-insensitive
    causes = ["..."]                      # most common first
    fixes = ["...`command`..."]           # the first is the one to try first
    source = "https://github.com/..."     # a public thread showing the message
    machine = ["apu"]                     # optional: facts of a machine where it answers first
    here = ["override", "hide_igpu"]      # optional: advice for the machine --explain runs on
    [[error.seen]]                        # one or more: the message verbatim, and where
    url = "https://github.com/..."
    message = "..."
    machine = ["apu"]                     # optional: the machine it was seen on

``machine`` names facts :mod:`.facts` reads (``apu``, ``igpu_and_dgpu``, ``wsl``): on a
machine that has them all, the entry answers before every other (rank
:data:`MACHINE_RANK`); elsewhere it keeps its rank.

A cause or fix may name a shared text as ``{{name}}``: the ``[snippets]`` of
``errors/snippets.toml``, or one computed here (``{{rocm_install}}``, ``{{override}}``).
Adding a failure is one block of data; ``tests/doctor/test_catalog.py`` checks every
block's messages are diagnosed as that block first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import NamedTuple

import tomllib

from .facts import TOPICS
from .gfx import OVERRIDE_RULE
from .install import torch_install_fix

__all__ = [
    "FACTS",
    "LAYER_FILES",
    "MACHINE_RANK",
    "CatalogError",
    "KnownError",
    "Seen",
    "load_errors",
    "snippets",
]

LAYER_FILES: dict[str, str] = {
    "driver": "kernel driver, firmware and platform (dmesg, /dev/kfd, WSL)",
    "runtime": "ROCm runtime (HIP, HSA, code objects, memory, faults)",
    "libraries": "ROCm libraries (rocBLAS, hipBLASLt, MIOpen, SMI)",
    "framework": "framework and wheels (torch, TheRock, extensions, Triton)",
    "distributed": "distributed (RCCL, interconnect, Ray)",
    "rlamd": "rlamd's own kernels and settings",
}
"""The data files in answer order (a tie on ``rank`` goes to the earlier layer)."""

FACTS = ("apu", "igpu_and_dgpu", "wsl")
"""The machine facts an entry's ``machine`` may name."""
MACHINE_RANK = 5
"""The rank of an entry whose ``machine`` facts this machine has."""

_FIELDS = {
    "key",
    "title",
    "rank",
    "patterns",
    "causes",
    "fixes",
    "source",
    "seen",
    "machine",
    "here",
}
_REQUIRED = _FIELDS - {"rank", "machine", "here"}
_TOKEN = re.compile(r"\{\{(\w+)\}\}")


class CatalogError(ValueError):
    """A data file of known errors is malformed (which file, which entry, what is wrong)."""


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


class Seen(NamedTuple):
    """A message verbatim as a public thread shows it, and the machine facts it had."""

    url: str
    message: str
    machine: tuple[str, ...] = ()


@dataclass(frozen=True)
class KnownError:
    """One failure people meet, how to recognise it, and what to do."""

    key: str
    title: str
    patterns: tuple[str, ...]
    """Regular expressions (case-insensitive) for the stable part of the message: paths,
    PIDs, addresses, sizes and gfx names vary and are not matched literally."""
    causes: tuple[str, ...]
    fixes: tuple[str, ...]
    """What to do, as commands where there is one, ``{{name}}`` snippets expanded."""
    source: str = ""
    layer: str = ""
    rank: int = 50
    seen: tuple[Seen, ...] = field(default=(), compare=False)
    machine: tuple[str, ...] = ()
    """Facts of a machine on which this diagnosis answers first (see :data:`FACTS`)."""
    here: tuple[str, ...] = ()
    """Topics of :func:`.facts.advice` that fit this failure on the machine at hand."""

    def rank_on(self, facts: frozenset[str] | None) -> int:
        """The rank on a machine with ``facts`` (``None``: unknown)."""
        if facts is not None and self.machine and set(self.machine) <= facts:
            return MACHINE_RANK
        return self.rank

    def match(self, text: str) -> re.Match[str] | None:
        """The earliest match of any pattern in ``text``, or None."""
        found = [m for p in self.patterns if (m := _compiled(p).search(text))]
        return min(found, key=lambda m: m.start()) if found else None

    def matches(self, text: str) -> bool:
        return self.match(text) is not None


def _read(name: str) -> dict:
    path = resources.files("rlamd.doctor") / "errors" / f"{name}.toml"
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(f"rlamd/doctor/errors/{name}.toml: {exc}") from exc


@cache
def snippets() -> dict[str, str]:
    """Every ``{{name}}`` a data file may use, expanded (the computed ones included)."""
    out = {
        "rocm_install": torch_install_fix("rocm"),
        "override": (
            "For a consumer card AMD does not list, set its family's override before starting "
            f"Python: {OVERRIDE_RULE}. Find your gfx name with `rocminfo | grep gfx` or `python "
            "-m rlamd.doctor`. This is unofficial and unsupported by AMD; a card the wheel "
            "lists needs no override."
        ),
    }
    raw = _read("snippets").get("snippets", {})
    for name, text in raw.items():
        out[name] = _TOKEN.sub(lambda m: out.get(m.group(1), m.group(0)), text)
    return out


def expand(text: str, where: str, extra: dict[str, str] | None = None) -> str:
    """``text`` with each ``{{name}}`` replaced (``extra`` first).

    Raises:
        CatalogError: a name no snippet has.
    """
    table = {**snippets(), **(extra or {})}

    def one(m: re.Match[str]) -> str:
        if m.group(1) not in table:
            raise CatalogError(
                f"{where}: unknown snippet {{{{{m.group(1)}}}}}; known: {', '.join(sorted(table))}"
            )
        return table[m.group(1)]

    return _TOKEN.sub(one, text)


def _entry(raw: dict, layer: str, index: int) -> KnownError:
    where = f"rlamd/doctor/errors/{layer}.toml entry {index + 1} ({raw.get('key', '?')})"
    unknown, missing = set(raw) - _FIELDS, _REQUIRED - set(raw)
    if unknown or missing:
        raise CatalogError(
            f"{where}: unknown fields {sorted(unknown)}, missing {sorted(missing)}; "
            f"accepted: {', '.join(sorted(_FIELDS))}"
        )
    for p in raw["patterns"]:
        try:
            _compiled(p)
        except re.error as exc:
            raise CatalogError(
                f"{where}: pattern {p!r} is not a regular expression: {exc}"
            ) from exc
    bad = sorted(
        {f for f in raw.get("machine", []) + [f for s in raw["seen"] for f in s.get("machine", [])]}
        - set(FACTS)
    )
    if bad:
        raise CatalogError(f"{where}: unknown machine facts {bad}; known: {', '.join(FACTS)}")
    bad_topics = sorted(set(raw.get("here", [])) - set(TOPICS))
    if bad_topics:
        raise CatalogError(f"{where}: unknown here topics {bad_topics}; known: {', '.join(TOPICS)}")
    seen = tuple(Seen(s["url"], s["message"], tuple(s.get("machine", ()))) for s in raw["seen"])
    if not seen or not raw["patterns"] or not raw["fixes"]:
        raise CatalogError(f"{where}: needs at least one pattern, fix and [[error.seen]] message")
    return KnownError(
        key=raw["key"],
        title=raw["title"],
        patterns=tuple(raw["patterns"]),
        causes=tuple(expand(c, where) for c in raw["causes"]),
        fixes=tuple(expand(f, where) for f in raw["fixes"]),
        source=raw["source"],
        layer=layer,
        rank=int(raw.get("rank", 50)),
        seen=seen,
        machine=tuple(raw.get("machine", ())),
        here=tuple(raw.get("here", ())),
    )


@cache
def load_errors() -> tuple[KnownError, ...]:
    """Every known error, in the order ``explain`` answers in: by rank, then layer, then
    the order of the file.

    Raises:
        CatalogError: a malformed file or entry, or a key used twice.
    """
    found: list[tuple[int, int, int, KnownError]] = []
    for li, layer in enumerate(LAYER_FILES):
        for ei, raw in enumerate(_read(layer).get("error", [])):
            e = _entry(raw, layer, ei)
            found.append((e.rank, li, ei, e))
    keys = [f[3].key for f in found]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise CatalogError(f"rlamd/doctor/errors: keys used twice: {', '.join(twice)}")
    return tuple(f[3] for f in sorted(found, key=lambda f: f[:3]))
