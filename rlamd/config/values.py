"""Typed values from text and TOML, the checks every section shares, and field docs.

Every config section is a frozen dataclass with a docstring under each field. Values from
text (flags, ``--set``) or TOML are converted to the field's type by :func:`coerce`;
:func:`apply_overrides` builds a section from them, runs the dataclass's own
``__post_init__`` and then :func:`check_fields`, the rules every section shares (finite
floats, no negative ints except those in :data:`INT_MINIMUMS`). Anything wrong fails with
the field, the value and what is accepted (:func:`rlamd.config.errors.bad_setting`).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import itertools
import math
import re
import sys
import types
import typing
from typing import Any

from .errors import ConfigError, bad_setting, closest

__all__ = [
    "INT_MAX",
    "INT_MAXIMUMS",
    "INT_MINIMUMS",
    "HelpFormatter",
    "apply_overrides",
    "check_fields",
    "coerce",
    "field_docs",
    "help_text",
    "shown_default",
]

INT_MINIMUMS: dict[str, int] = {
    "ray.max_worker_restarts": -1,
}
"""The int settings that may go below 0, with their smallest accepted value, keyed by
``section.field``. Every other int setting (and every int inside a tuple setting) is
refused below 0 by :func:`check_fields`. ``-1`` here means "unlimited" (see the field's
docstring)."""

INT_MAX = 2**63 - 1
"""The largest int any setting takes (counters and sizes are 64-bit in numpy and torch)."""

INT_MAXIMUMS: dict[str, tuple[int, int, str]] = {
    "train.steps": (
        1,
        1_000_000_000,
        "env i at step s gets seed train.seed + s + i, and ale-py takes seeds up to 2**31 - 1",
    ),
}
"""The int settings with a smaller bound than :data:`INT_MAX`: ``(smallest, largest, why)``,
keyed by ``section.field``."""


_MARKUP = (
    (re.compile(r"``?([^`]+)``?"), r"\1"),  # reStructuredText literals
    (re.compile(r"\s*\(issue \d+\)"), ""),  # citations of the tracker
    (re.compile(r",\s*issue \d+\)"), ")"),
    (re.compile(r"\bNone\b"), "auto"),  # the spelling --set takes for it
)


def help_text(doc: str) -> str:
    """A field's docstring as ``--help`` prints it: no markup, no issue numbers, and
    ``auto`` for ``None``."""
    for pattern, repl in _MARKUP:
        doc = pattern.sub(repl, doc)
    return doc


def shown_default(value: Any, doc: str = "") -> str:
    """A default as ``--help`` spells it: ``on``/``off`` for booleans, ``auto`` or ``none``
    for None (``auto`` where the setting's help speaks of it), ``repr`` otherwise."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "auto" if "auto" in help_text(doc) else "none"
    return repr(value)


class NearestChoiceParser(argparse.ArgumentParser):
    """argparse's parser whose refusal of a flag's choice (``--algo sax``) lists the
    accepted ones and names the nearest, as every other refusal of rlamd does."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        names = [str(c) for c in action.choices]
        close = closest(str(value), names)
        hint = f". Did you mean {close}?" if close else ""
        raise argparse.ArgumentError(action, f"{value!r}; accepted: {', '.join(names)}{hint}")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's, with ``(default: X)`` never broken across lines (whatever ``COLUMNS``
    says), so every option's default reads, and can be searched for, as one piece."""

    _GLUE = "\x1f"  # not whitespace to argparse or textwrap

    def _split_lines(self, text: str, width: int) -> list[str]:
        glued = re.sub(r"\(default: [^)]*\)", lambda m: m.group(0).replace(" ", self._GLUE), text)
        return [line.replace(self._GLUE, " ") for line in super()._split_lines(glued, width)]


def field_docs(cls: type) -> dict[str, str]:
    """The one-line docstrings under each dataclass field (for ``--help``, through
    :func:`help_text`), inherited fields' too (a subclass's docstring wins)."""
    docs: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if base is not object:
            docs.update(_own_field_docs(base))
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    """The field docstrings written in ``cls``'s own body."""
    import inspect

    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # builtins, and classes made at run time
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
            docs[node.target.id] = help_text(" ".join(nxt.value.value.split()))
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
        if isinstance(value, str):  # "64,64", "(64, 64)", "[64, 64]"; "none" or "": empty
            text = value.strip().strip("()[]")
            empty = text.lower() in ("none", "null")
            value = [] if empty else [v for v in text.split(",") if v.strip()]
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
      for the few settings documented to take a negative value, and at most
      :data:`INT_MAX`, or ``INT_MAXIMUMS[section.field]`` where that is less.

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
                what = "whole numbers" if isinstance(value, tuple) else "an integer"
                if number < low:
                    raise bad_setting(section, f.name, value, f"{what} >= {low}")
                least, high, why = INT_MAXIMUMS.get(f"{section}.{f.name}", (low, INT_MAX, None))
                if number > high:
                    raise bad_setting(
                        section, f.name, value, f"{what} from {least} to {high:,}", why=why
                    )


def _in_section(section: str, message: str, names: list[str]) -> str:
    """A dataclass's own ``ValueError`` text in the one shape: ``gamma=1.5; ...`` ->
    ``dqn.gamma=1.5; ...``; a message that names no field gets ``dqn: `` in front."""
    if message.startswith(f"{section}."):
        return message
    key = message.split("=", 1)[0]
    if "=" in message and key in names:
        return f"{section}.{message}"
    return f"{section}: {message}"


def coerce_all(cls: type, section: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` converted to the types of ``cls``'s fields (:func:`coerce`), each key
    checked on its own (a layer of settings can be checked before it is merged).

    Raises:
        ConfigError: an unknown key (with the nearest names) or a value of the wrong kind.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    hints = _hints(cls)
    values = {}
    for key, value in overrides.items():
        if key not in names:
            close = closest(key, names)
            raise bad_setting(
                section,
                key,
                value,
                ", ".join(names),
                why="no such setting",
                close=f"{section}.{close}" if close else None,
            )
        values[key] = coerce(section, key, value, hints[key])
    return values


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
        values = coerce_all(cls, section, overrides)
        try:
            obj = dataclasses.replace(obj, **values)
        except ConfigError:
            raise
        except ValueError as exc:
            raise ConfigError(_in_section(section, str(exc), names)) from None
    check_fields(obj, section)
    return obj
