"""Filling frozen config dataclasses from presets, TOML files, flags and ``--set``.

Every config is a frozen dataclass with a docstring under each field. A run's
configuration is a set of *sections* (``train``, ``dqn``, ``ppo``, ``atari``, ``ray``);
``--set dqn.lr=1e-4`` names a field with its section, ``--set lr=1e-4`` works when only
one section has that field. Values from text are converted to the field's type, and
anything wrong fails before work starts with the field, the value and what is accepted.

Every message about a setting has one shape (built by :func:`bad_setting`)::

    SECTION.KEY=VALUE[ (WHY)]; accepted: WHAT[. Did you mean NAME?]

e.g. ``dqn.lr=nan; accepted: a finite number``. One validator, :func:`check_fields`,
holds the rules every section shares: float fields are finite and int fields are not
negative, except the few listed in :data:`INT_MINIMUMS`. Rules that relate several
settings live in :mod:`rlamd.rules`.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import itertools
import json
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "INT_MINIMUMS",
    "ConfigError",
    "apply_overrides",
    "bad_setting",
    "check_fields",
    "coerce",
    "field_docs",
    "load_toml",
    "parse_set",
    "to_toml",
]


class ConfigError(ValueError):
    """A configuration value or key that rlamd cannot accept."""


INT_MINIMUMS: dict[str, int] = {
    "ray.max_worker_restarts": -1,
}
"""The int settings that may go below 0, with their smallest accepted value, keyed by
``section.field``. Every other int setting (and every int inside a tuple setting) is
refused below 0 by :func:`check_fields`. ``-1`` here means "unlimited" (see the field's
docstring)."""


def bad_setting(
    section: str,
    key: str,
    value: Any,
    accepted: str,
    *,
    why: str | None = None,
    close: str | None = None,
) -> ConfigError:
    """The one-line error for a setting, in the one shape every config message uses.

    ``SECTION.KEY=VALUE[ (WHY)]; accepted: WHAT[. Did you mean CLOSE?]``; the value is
    shown with ``repr`` (text quoted, ``nan``/``inf`` bare).

    Args:
        section: ``train``, ``dqn``, ... (empty: the key alone).
        key: the field name.
        value: what was given.
        accepted: what would be accepted, in words (``a number in [0, 1]``).
        why: what is wrong when the range alone does not say it (another setting, say).
        close: the nearest valid value or name, when there is one.
    """
    where = f"{section}.{key}" if section else key
    reason = f" ({why})" if why else ""
    hint = f". Did you mean {close}?" if close else ""
    return ConfigError(f"{where}={value!r}{reason}; accepted: {accepted}{hint}")


def field_docs(cls: type) -> dict[str, str]:
    """The one-line docstrings under each dataclass field (for ``--help``)."""
    import inspect

    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # pragma: no cover
        return {}
    docs: dict[str, str] = {}
    tree = ast.parse(source.lstrip())
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for node, nxt in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _hints(cls: type) -> dict[str, Any]:
    module = sys.modules[cls.__module__]
    return typing.get_type_hints(cls, vars(module))


def _parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError
        return int(value)
    text = str(value).strip().replace("_", "")
    try:
        return int(text)  # exact, however large (a float would round 2**63 + 1)
    except ValueError:
        f = float(text)  # "1e6" and "2.0" are whole numbers too
        if not f.is_integer():
            raise ValueError from None
        return int(f)


def _parse_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError
    return float(str(value).strip().replace("_", "")) if isinstance(value, str) else float(value)


def coerce(section: str, name: str, value: Any, hint: Any) -> Any:
    """Convert ``value`` (text from a flag, or a TOML value) to the type ``hint``.

    Floats must be finite: ``nan``, ``inf`` and ``-inf`` are refused for every float
    setting, whether they come as text or as TOML floats.

    Raises:
        ConfigError: the value cannot be read as ``hint``, in the one-line shape.
    """
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        # None means "rlamd decides" (the affinity mask's cores, the replay that fits, the
        # cluster's GPUs), so `auto` is accepted as a spelling of it too.
        if value is None or (
            isinstance(value, str) and value.strip().lower() in ("none", "null", "", "auto")
        ):
            return None
        return coerce(section, name, value, args[0])
    if origin is tuple:
        (item,) = typing.get_args(hint)[:1]
        if isinstance(value, str):
            value = [v for v in value.replace("(", "").replace(")", "").split(",") if v.strip()]
        elif not isinstance(value, (list, tuple)):
            value = [value]  # TOML `hidden = 64` means what `--set hidden=64` means
        return tuple(coerce(section, name, v, item) for v in value)
    try:
        if hint is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if hint is int:
            return _parse_int(value)
        if hint is float:
            number = _parse_float(value)
            if not math.isfinite(number):
                raise bad_setting(section, name, number, "a finite number")
            return number
        if hint is str:
            return str(value)
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, ConfigError):
            raise
        accepted = {bool: "true or false", int: "a whole number", float: "a number"}[hint]
        raise bad_setting(section, name, value, accepted) from None
    return value


def _numbers(value: Any) -> list[int | float]:
    """The ints and floats in a field's value (a tuple's items too; bools are not numbers)."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    return [v for v in items if isinstance(v, (int, float)) and not isinstance(v, bool)]


def check_fields(obj: Any, section: str) -> None:
    """The checks every config section shares, on every field of ``obj``.

    * every float is finite (no ``nan``, ``inf`` or ``-inf``);
    * every int, and every int in a tuple, is >= 0, or >= ``INT_MINIMUMS[section.field]``
      for the few settings documented to take a negative value.

    The dataclass's own ``__post_init__`` says what each field accepts beyond that.

    Raises:
        ConfigError: the first field that breaks a rule, in the one-line shape.
    """
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        for number in _numbers(value):
            if isinstance(number, float) and not math.isfinite(number):
                raise bad_setting(section, f.name, value, "a finite number")
            if isinstance(number, int):
                low = INT_MINIMUMS.get(f"{section}.{f.name}", 0)
                if number < low:
                    what = "whole numbers" if isinstance(value, tuple) else "an integer"
                    raise bad_setting(section, f.name, value, f"{what} >= {low}")


def _in_section(section: str, message: str, names: list[str]) -> str:
    """A dataclass's own ``ValueError`` text in the one shape: ``gamma=1.5; ...`` ->
    ``dqn.gamma=1.5; ...``; a message that names no field gets ``dqn: `` in front."""
    if message.startswith(f"{section}."):
        return message
    key = message.split("=", 1)[0]
    if "=" in message and key in names:
        return f"{section}.{message}"
    return f"{section}: {message}"


def apply_overrides(obj: Any, section: str, overrides: dict[str, Any]) -> Any:
    """``dataclasses.replace`` with type conversion, the shared checks and teaching errors.

    Values are converted by :func:`coerce`, the dataclass's own ``__post_init__`` checks
    run (their ``ValueError`` is re-raised in the one-line shape, naming the section),
    then :func:`check_fields` (also on an unchanged ``obj``, so defaults pass it too).

    Raises:
        ConfigError: an unknown key (with the nearest names) or an invalid value.
    """
    cls = type(obj)
    names = [f.name for f in dataclasses.fields(cls)]
    if overrides:
        hints = _hints(cls)
        values = {}
        for key, value in overrides.items():
            if key not in names:
                close = difflib.get_close_matches(key, names, n=1)
                raise bad_setting(
                    section,
                    key,
                    value,
                    ", ".join(names),
                    why="no such setting",
                    close=f"{section}.{close[0]}" if close else None,
                )
            values[key] = coerce(section, key, value, hints[key])
        try:
            obj = dataclasses.replace(obj, **values)
        except ConfigError:
            raise
        except ValueError as exc:
            raise ConfigError(_in_section(section, str(exc), names)) from None
    check_fields(obj, section)
    return obj


def parse_set(items: list[str], sections: dict[str, Any]) -> dict[str, dict[str, str]]:
    """``["dqn.lr=1e-4", "steps=5000"]`` -> ``{"dqn": {"lr": "1e-4"}, "train": {...}}``.

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
                close = difflib.get_close_matches(section, list(sections), n=1)
                raise bad_setting(
                    section,
                    name,
                    value,
                    f"sections {', '.join(sections)}",
                    why=f"no section '{section}'",
                    close=f"{close[0]}.{name}" if close else None,
                )
        else:
            owners = [
                s for s, obj in sections.items() if key in {f.name for f in dataclasses.fields(obj)}
            ]
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
                close = difflib.get_close_matches(key, every, n=1)
                full = [
                    f"{s}.{c}"
                    for c in close
                    for s, o in sections.items()
                    if c in {f.name for f in dataclasses.fields(o)}
                ]
                raise bad_setting(
                    "",
                    key,
                    value,
                    "SECTION.KEY names listed by --help",
                    why="no such setting",
                    close=" or ".join(dict.fromkeys(full)) or None,
                )
            section, name = owners[0], key
        out.setdefault(section, {})[name] = value
    return out


def load_toml(path: str | Path, sections: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Read a config file: ``[train]``, ``[dqn]``, ... tables; top-level keys are ``train``.

    Raises:
        ConfigError: no such file, not TOML, or an unknown table.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"--config {path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config {path}: not valid TOML ({exc})") from None
    out: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            if key not in sections:
                close = difflib.get_close_matches(key, list(sections), n=1)
                hint = f". Did you mean [{close[0]}]?" if close else ""
                tables = ", ".join(f"[{s}]" for s in sections)
                raise ConfigError(
                    f"--config {path}: unknown table [{key}]; accepted: {tables}{hint}"
                )
            out.setdefault(key, {}).update(value)
        else:
            out.setdefault("train", {})[key] = value
    return out


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
            if value is not None:
                lines.append(f"{f.name} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)
