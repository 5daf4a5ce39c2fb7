"""Where settings come from as text: ``--set`` items and TOML files (and back to TOML).

``--set dqn.lr=1e-4`` names a field with its section; ``--set lr=1e-4`` works when only
one section has that field, or only algorithms' sections and the run's algorithm's is one. A config file holds ``[train]``, ``[dqn]``, ... tables; what
:func:`to_toml` writes, :func:`load_toml` reads back to the same settings.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from .errors import ConfigError, bad_setting, closest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["load_toml", "parse_set", "to_toml"]


def parse_set(
    items: list[str],
    sections: dict[str, Any],
    *,
    algo: str | None = None,
    algorithms: Collection[str] = (),
) -> dict[str, dict[str, str]]:
    """``["dqn.lr=1e-4", "steps=5000"]`` -> ``{"dqn": {"lr": "1e-4"}, "train": {...}}``.

    A bare key that several algorithm sections (``algorithms``) have and no other section
    has is the run's algorithm's (``algo``) when it is one of them: ``--algo sac --set
    lr=1e-3`` sets ``sac.lr``.

    Raises:
        ConfigError: an item without ``=``, an unknown section, or a bare key that no
            section or more than one section has.
    """
    out: dict[str, dict[str, str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(
                f"--set {item!r}; accepted: SECTION.KEY=VALUE, e.g. --set dqn.lr=1e-4"
            )
        key, value = key.strip(), value.strip()
        if "." in key:
            section, name = key.split(".", 1)
            if section not in sections:
                close = closest(section, sections)
                raise bad_setting(
                    section,
                    name,
                    value,
                    f"sections {', '.join(sections)}",
                    why=f"no section '{section}'",
                    close=f"{close}.{name}" if close else None,
                )
        else:
            section, name = _owner(key, value, sections, algo, algorithms), key
        out.setdefault(section, {})[name] = value
    return out


def _owner(
    key: str, value: str, sections: dict[str, Any], algo: str | None, algorithms: Collection[str]
) -> str:
    """The section of a bare ``--set`` key (see :func:`parse_set`)."""
    owners = [s for s, obj in sections.items() if key in {f.name for f in dataclasses.fields(obj)}]
    if algo in owners and set(owners) - {algo} <= set(algorithms):
        return algo
    if len(owners) > 1:
        raise bad_setting(
            "",
            key,
            value,
            " or ".join(f"{s}.{key}" for s in owners),
            why=f"{', '.join(owners)} all have '{key}'; say which",
        )
    if not owners:
        every = [f.name for o in sections.values() for f in dataclasses.fields(o)]
        near = closest(key, every)
        full = [
            f"{s}.{near}"
            for s, o in sections.items()
            if near in {f.name for f in dataclasses.fields(o)}
        ]
        raise bad_setting(
            "",
            key,
            value,
            "SECTION.KEY names listed by --help",
            why="no such setting",
            close=" or ".join(dict.fromkeys(full)) or None,
        )
    return owners[0]


def load_toml(path: str | Path, sections: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Read a config file: ``[train]``, ``[dqn]``, ... tables; top-level keys are ``train``.

    Raises:
        ConfigError: no such file, not TOML, or an unknown table.
    """
    path = Path(path)
    try:
        data = tomllib.loads(_toml_text(path))
    except FileNotFoundError:
        raise ConfigError(f"--config {path}: no such file") from None
    except IsADirectoryError:
        inside = path / "config.toml"
        hint = f" (a run's settings: --config {inside})" if inside.is_file() else ""
        raise ConfigError(f"--config {path} is a folder; accepted: a TOML file{hint}") from None
    except OSError as exc:
        raise ConfigError(f"--config {path}: cannot be read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config {path}: not valid TOML ({exc})") from None
    out: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            if key not in sections:
                close = closest(key, sections)
                hint = f". Did you mean [{close}]?" if close else ""
                tables = ", ".join(f"[{s}]" for s in sections)
                raise ConfigError(
                    f"--config {path}: unknown table [{key}]; accepted: {tables}{hint} "
                    "(a plugin algorithm's table is known once RLAMD_PLUGINS loads it)"
                )
            out.setdefault(key, {}).update(value)
        else:
            out.setdefault("train", {})[key] = value
    return out


_BOMS = {b"\xff\xfe": "UTF-16 (little-endian)", b"\xfe\xff": "UTF-16 (big-endian)"}


def _toml_text(path: Path) -> str:
    """A TOML file's text: UTF-8, with or without the byte-order mark some editors write.

    Raises:
        ConfigError: UTF-16, or bytes that are not UTF-8 (latin-1, cp1252), naming the file,
            its encoding as far as it shows and where.
    """
    raw = path.read_bytes()
    for mark, name in _BOMS.items():
        if raw.startswith(mark):
            raise ConfigError(
                f"--config {path} is {name} text; accepted: a UTF-8 file (TOML is UTF-8: "
                "save it as UTF-8 in your editor, or iconv -f UTF-16 -t UTF-8)"
            )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"--config {path} is not UTF-8: byte 0x{raw[exc.start]:02x} on line {line} (a "
            "latin-1 or cp1252 file?); accepted: a UTF-8 file (save it as UTF-8, or iconv -f "
            "latin1 -t UTF-8)"
        ) from None


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def to_toml(sections: dict[str, Any]) -> str:
    """The resolved configuration as TOML, readable back with ``--config``."""
    lines: list[str] = []
    for name, obj in sections.items():
        lines.append(f"[{name}]")
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            # TOML has no null: "none" reads back as None (rlamd decides), so a preset's
            # value for the field cannot take its place.
            lines.append(f"{f.name} = {_toml_value('none' if value is None else value)}")
        lines.append("")
    return "\n".join(lines)
