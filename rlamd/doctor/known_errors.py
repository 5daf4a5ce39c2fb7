"""Errors people meet running PyTorch on AMD GPUs, with their usual causes and fixes.

One table serves ``python -m rlamd.doctor --explain "<message>"`` and ``--explain-file LOG``,
the doctor's failed checks, and ``rlamd.train`` when a GPU error stops training. The rows are
data (``rlamd/doctor/errors/*.toml``, read by :mod:`.catalog`), in the order :func:`explain`
answers in: the most specific first, so a message that matches several gets the right
diagnosis first.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import KnownError, load_errors
from .codes import code_errors

__all__ = [
    "KNOWN_ERRORS",
    "KnownError",
    "LogMatch",
    "explain",
    "explain_log",
    "format_explanation",
    "format_row",
]

KNOWN_ERRORS: tuple[KnownError, ...] = load_errors()


def explain(text: str, facts: frozenset[str] | None = None) -> list[KnownError]:
    """Every known error ``text`` (a pasted error or log) shows, most specific first: the
    curated failures by rank, each documented status code it carries (:mod:`.codes`) in
    their place among them. ``facts`` (this machine's, see :mod:`.facts`) put the
    diagnoses made for such a machine first."""
    rows = [e for e in KNOWN_ERRORS if e.matches(text)]
    return sorted([*rows, *code_errors(text)], key=lambda e: e.rank_on(facts))


@dataclass(frozen=True)
class LogMatch:
    """A known error found in a log, and where."""

    error: KnownError
    line_no: int
    """1-based number of the first line it matched."""
    line: str
    """That line, stripped."""


def explain_log(text: str, facts: frozenset[str] | None = None) -> list[LogMatch]:
    """Every known error in a whole log, each once, in the order it first appears.

    Lines are matched one at a time (a message is one line in a log); an error found on no
    single line but in the whole text (a message wrapped over lines) is placed at its
    first line. Ties on a line keep the table's order.
    """
    lines = text.splitlines()
    found: dict[str, LogMatch] = {}
    for no, line in enumerate(lines, start=1):
        for e in explain(line, facts):
            if e.key not in found:
                found[e.key] = LogMatch(e, no, line.strip())
    for e in explain(text, facts):
        m = None if e.key in found else e.match(text)
        if m is not None:
            no = text.count("\n", 0, m.start()) + 1
            found[e.key] = LogMatch(e, no, lines[no - 1].strip() if lines else "")
    order = {e.key: i for i, e in enumerate(KNOWN_ERRORS)}
    return sorted(
        found.values(),
        key=lambda m: (m.line_no, m.error.rank_on(facts), order.get(m.error.key, len(order))),
    )


def format_explanation(err: KnownError) -> str:
    return format_row(err.title, err.causes, err.fixes, err.source, err.layer)


def format_row(title: str, causes, fixes, source: str, layer: str) -> str:
    """A diagnosis as the terminal shows it (its causes, its fixes, where it comes from)."""
    lines = [f"{title}", "  likely causes:"]
    lines += [f"    - {c}" for c in causes]
    lines.append("  fixes:")
    lines += [f"    - {f}" for f in fixes]
    if source:
        lines.append(f"  {'documented in' if layer == 'codes' else 'seen in'}: {source}")
    return "\n".join(lines)
