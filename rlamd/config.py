"""Filling frozen config dataclasses from presets, TOML files, flags and ``--set``.

Every config is a frozen dataclass with a docstring under each field (STYLE.md). A
run's configuration is a set of *sections* (``train``, ``dqn``, ``ppo``, ``atari``);
``--set dqn.lr=1e-4`` names a field with its section, ``--set lr=1e-4`` works when only
one section has that field. Values from text are converted to the field's type, and
anything wrong fails before work starts with the field, the value and what is accepted.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import itertools
import json
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
    "ConfigError",
    "apply_overrides",
    "coerce",
    "field_docs",
    "load_toml",
    "parse_set",
    "to_toml",
]


class ConfigError(ValueError):
    """A configuration value or key that rlamd cannot accept."""


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


def coerce(section: str, name: str, value: Any, hint: Any) -> Any:
    """Convert ``value`` (text from a flag, or a TOML value) to the type ``hint``."""
    where = f"{section}.{name}" if section else name
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null", "")):
            return None
        return coerce(section, name, value, args[0])
    if origin is tuple:
        (item,) = typing.get_args(hint)[:1]
        if isinstance(value, str):
            value = [v for v in value.replace("(", "").replace(")", "").split(",") if v.strip()]
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
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, float):
                if not value.is_integer():
                    raise ValueError
                return int(value)
            text = str(value).strip().replace("_", "")
            f = float(text)
            if not f.is_integer():
                raise ValueError
            return int(f)
        if hint is float:
            if isinstance(value, bool):
                raise ValueError
            return (
                float(str(value).strip().replace("_", ""))
                if isinstance(value, str)
                else float(value)
            )
        if hint is str:
            return str(value)
    except (TypeError, ValueError):
        accepted = {bool: "true or false", int: "a whole number", float: "a number"}[hint]
        raise ConfigError(f"{where}={value!r} is not valid; accepted: {accepted}") from None
    return value


def apply_overrides(obj: Any, section: str, overrides: dict[str, Any]) -> Any:
    """``dataclasses.replace`` with type conversion and teaching errors.

    The dataclass's own ``__post_init__`` checks then run, and their ``ValueError`` is
    re-raised naming the section.
    """
    if not overrides:
        return obj
    cls = type(obj)
    hints = _hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    values = {}
    for key, value in overrides.items():
        if key not in names:
            close = difflib.get_close_matches(key, names, n=3)
            hint = f" Did you mean {', '.join(f'{section}.{c}' for c in close)}?" if close else ""
            raise ConfigError(
                f"Unknown setting '{section}.{key}'.{hint} Accepted: {', '.join(names)}"
            )
        values[key] = coerce(section, key, value, hints[key])
    try:
        return dataclasses.replace(obj, **values)
    except ValueError as exc:
        raise ConfigError(f"[{section}] {exc}") from None


def parse_set(items: list[str], sections: dict[str, Any]) -> dict[str, dict[str, str]]:
    """``["dqn.lr=1e-4", "steps=5000"]`` -> ``{"dqn": {"lr": "1e-4"}, "train": {...}}``."""
    out: dict[str, dict[str, str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set dqn.lr=1e-4")
        key = key.strip()
        if "." in key:
            section, name = key.split(".", 1)
            if section not in sections:
                close = difflib.get_close_matches(section, list(sections), n=1)
                hint = f" Did you mean '{close[0]}'?" if close else ""
                raise ConfigError(
                    f"--set {item!r}: unknown section '{section}'; accepted: {', '.join(sections)}.{hint}"
                )
        else:
            owners = [
                s for s, obj in sections.items() if key in {f.name for f in dataclasses.fields(obj)}
            ]
            if len(owners) > 1:
                raise ConfigError(
                    f"--set {item!r}: '{key}' exists in {', '.join(owners)}; write e.g. {owners[0]}.{key}={value}"
                )
            if not owners:
                every = [
                    f"{s}.{f.name}" for s, o in sections.items() for f in dataclasses.fields(o)
                ]
                close = difflib.get_close_matches(key, [e.split(".", 1)[1] for e in every], n=3)
                hint = f" Did you mean {', '.join(close)}?" if close else ""
                raise ConfigError(f"--set {item!r}: no setting called '{key}'.{hint}")
            section, name = owners[0], key
        out.setdefault(section, {})[name] = value.strip()
    return out


def load_toml(path: str | Path, sections: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Read a config file: ``[train]``, ``[dqn]``, ... tables; top-level keys are ``train``."""
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
                raise ConfigError(
                    f"--config {path}: unknown table [{key}]; accepted: {', '.join(sections)}"
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
