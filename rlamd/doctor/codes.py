"""Every documented status code of the AMD stack, read from ``rlamd/doctor/codes/*.toml``.

One file per library (HIP, HSA, rocBLAS, hipBLAS/hipBLASLt, MIOpen, RCCL, Triton), each
citing the header its names and numbers come from::

    library = "HIP runtime"
    type = "hipError_t"
    source = "https://github.com/ROCm/HIP/blob/<commit>/include/hip/hip_runtime_api.h"
    text_prefix = '(?:HIP|CUDA) error:\\s*'   # optional: what stands before a code's text
    number_pattern = '...(\\d+)'              # optional: a code named by its number
    alias_prefixes = ["CUBLAS_STATUS_"]       # optional: other spellings of the prefix
    [group.launch]                            # causes and first commands a group shares
    causes = ["..."]
    commands = ["..."]
    here = ["override"]                       # optional: advice for the machine at hand
    [[code]]
    name = "hipErrorLaunchOutOfResources"
    value = 701
    text = "too many resources requested for launch"   # optional: the library's string
    group = "launch"
    meaning = "..."
    patterns = ['...(?P<required>\\d+)...']          # optional: in place of the name

:func:`code_errors` turns every code a message carries into a :class:`KnownError` (rank
85: after the curated failures, before the harmless warnings), so no message naming a
documented code goes unexplained.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import tomllib

from .catalog import CatalogError, KnownError, expand

__all__ = ["CODE_RANK", "TABLES", "Code", "CodeTable", "code_errors", "load_tables"]

TABLES = ("hip", "hsa", "rocblas", "hipblas", "miopen", "rccl", "triton")
CODE_RANK = 85
_MIN_BARE_TEXT = 28
"""A code's text shorter than this ("out of memory") counts only after ``text_prefix``."""


@dataclass(frozen=True)
class Code:
    table: str
    name: str
    value: int | str
    shown: str
    """The value as the header writes it (``701``, ``0x1016``)."""
    meaning: str
    group: str
    text: str = ""
    patterns: tuple[re.Pattern[str], ...] = ()


@dataclass(frozen=True)
class CodeTable:
    id: str
    library: str
    type: str
    source: str
    groups: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]
    """group name -> (causes, commands, here topics), snippets expanded."""
    codes: tuple[Code, ...]
    number: re.Pattern[str] | None


def _value(v: int | str) -> int | str:
    return int(v, 16) if isinstance(v, str) and v.lower().startswith("0x") else v


def _code(table: str, raw: dict, text_prefix: str, aliases: list[str]) -> Code:
    name = raw["name"]
    pats = [re.compile(p, re.IGNORECASE) for p in raw.get("patterns", [])]
    if not pats:
        spellings = [name] + [
            a + name.split("_STATUS_", 1)[1] for a in aliases if "_STATUS_" in name
        ]
        pats.append(re.compile("|".join(rf"\b{re.escape(s)}\b" for s in spellings)))
        text = raw.get("text", "")
        if text:
            bare = len(text) >= _MIN_BARE_TEXT or not text_prefix
            pats.append(re.compile(("" if bare else text_prefix) + re.escape(text), re.IGNORECASE))
    return Code(
        table,
        name,
        _value(raw["value"]),
        str(raw["value"]),
        raw["meaning"],
        raw["group"],
        raw.get("text", ""),
        tuple(pats),
    )


def _table(tid: str) -> CodeTable:
    where = f"rlamd/doctor/codes/{tid}.toml"
    try:
        raw = tomllib.loads(
            (resources.files("rlamd.doctor") / "codes" / f"{tid}.toml").read_text("utf-8")
        )
        groups = {
            g: (
                tuple(expand(c, where) for c in v["causes"]),
                tuple(expand(c, where) for c in v["commands"]),
                tuple(v.get("here", ())),
            )
            for g, v in raw["group"].items()
        }
        prefix, aliases = raw.get("text_prefix", ""), raw.get("alias_prefixes", [])
        codes = tuple(_code(tid, c, prefix, aliases) for c in raw["code"])
        bad = sorted({c.group for c in codes} - set(groups))
        if bad:
            raise CatalogError(f"{where}: codes name groups it lacks: {', '.join(bad)}")
        number = raw.get("number_pattern")
        return CodeTable(
            tid,
            raw["library"],
            raw["type"],
            raw["source"],
            groups,
            codes,
            re.compile(number, re.IGNORECASE) if number else None,
        )
    except (OSError, KeyError, tomllib.TOMLDecodeError, re.error) as exc:
        raise CatalogError(f"{where}: {type(exc).__name__}: {exc}") from exc


@cache
def load_tables() -> tuple[CodeTable, ...]:
    return tuple(_table(t) for t in TABLES)


def _hits(table: CodeTable, text: str) -> list[tuple[int, Code, dict[str, str]]]:
    """(position, code, named groups) of every code of ``table`` in ``text``."""
    found = []
    for code in table.codes:
        ms = [m for p in code.patterns if (m := p.search(text))]
        if ms:
            m = min(ms, key=lambda m: m.start())
            found.append((m.start(), code, m.groupdict()))
    if table.number is not None:
        for m in table.number.finditer(text):
            value = _value(m.group(1)) if m.group(1).lower().startswith("0x") else int(m.group(1))
            code = next((c for c in table.codes if c.value == value), None)
            if code is not None:
                found.append((m.start(), code, {}))
    return found


def _diagnosis(table: CodeTable, code: Code, found: dict[str, str]) -> KnownError:
    causes, commands, here = table.groups[code.group]
    meaning = code.meaning.format_map({k: v or "?" for k, v in found.items()})
    shown = f" = {code.shown}" if isinstance(code.value, int) else ""
    text = f": {code.text}" if code.text else ""
    return KnownError(
        key=f"{table.id}:{code.name}",
        title=f"{table.library} {table.type} {code.name}{shown}{text}",
        patterns=tuple(p.pattern for p in code.patterns),
        causes=(meaning, *causes),
        fixes=commands,
        source=table.source,
        layer="codes",
        rank=CODE_RANK,
        here=here,
    )


def code_errors(text: str) -> list[KnownError]:
    """A diagnosis for every documented code ``text`` carries, in the order they appear
    (each code once)."""
    hits: dict[str, tuple[int, CodeTable, Code, dict[str, str]]] = {}
    for table in load_tables():
        for pos, code, found in _hits(table, text):
            key = f"{table.id}:{code.name}"
            if key not in hits or pos < hits[key][0]:
                hits[key] = (pos, table, code, found)
    ordered = sorted(hits.values(), key=lambda h: h[0])
    return [_diagnosis(t, c, f) for _, t, c, f in ordered]
