"""Configuration errors, in the one shape every message about a setting has.

Every message about a setting has one shape (built by :func:`bad_setting`)::

    SECTION.KEY=VALUE[ (WHY)]; accepted: WHAT[. Did you mean NAME?]

e.g. ``dqn.lr=nan; accepted: a finite number``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

__all__ = ["ConfigError", "bad_setting", "closest"]


class ConfigError(ValueError):
    """A configuration value or key that rlamd cannot accept."""


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


def closest(name: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` nearest ``name`` (:func:`difflib.get_close_matches`), or None."""
    found = difflib.get_close_matches(name, list(names), n=1)
    return found[0] if found else None
