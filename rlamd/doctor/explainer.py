"""``--explain`` / ``--explain-file``: the known errors a message shows, with this machine's
fixes, and for a message nothing matches what was recognised, the next commands and a
report to paste into an issue tracker. Never a bare list of titles.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from .catalog import KnownError
from .checks import diagnose
from .facts import MachineFacts, _data, advice, read_facts
from .known_errors import LogMatch, explain, explain_log, format_row
from .system import System

__all__ = ["explain_file_text", "explain_text", "recognise", "render_file", "render_message"]

_RECOGNISERS: dict[str, str] = {
    "status codes": r"\b(?:hip(?:Error|Success)\w*|HSA_STATUS_\w+|rocblas_status_\w+|"
    r"(?:HIP|CU)BLAS_STATUS_\w+|miopenStatus\w+|nccl[A-Z]\w+Error|HIPRTC_ERROR_\w+)\b",
    "libraries": r"\b(?:rocBLAS|hipBLASLt|rocblaslt|hipBLAS|MIOpen|RCCL|NCCL|Gloo|Triton|"
    r"HSA|HIP|amdgpu|KFD|ROCr|comgr|Tensile|AOTriton|Ray)\b",
    "gfx targets": r"(?<![0-9a-z])gfx[0-9a-f]{3,4}(?![0-9a-z])",
    "addresses": r"\b0x[0-9a-fA-F]{8,16}\b",
    "files": r"(?:/[\w.+-]+){2,}\.(?:so[\d.]*|dat|kdb|cpp|cc|py|hsaco)\b",
}
"""What an unmatched message is searched for (shown back, each value once)."""


def recognise(text: str) -> dict[str, list[str]]:
    """The codes, library names, gfx names, addresses and files ``text`` mentions."""
    out = {}
    for what, pattern in _RECOGNISERS.items():
        flags = re.IGNORECASE if what in ("libraries", "gfx targets") else 0
        found = list(dict.fromkeys(m.group(0) for m in re.finditer(pattern, text, flags)))
        if found:
            out[what] = found[:12]
    return out


def _as_dict(e: KnownError, facts: MachineFacts | None) -> dict:
    row = {
        "key": e.key,
        "title": e.title,
        "layer": e.layer,
        "causes": list(e.causes),
        "fixes": list(e.fixes),
        "source": e.source,
    }
    if facts is not None and facts.has_amd_gpu:
        row["here"] = advice(facts, e.here)
    return row


def _machine(facts: MachineFacts | None) -> dict | None:
    if facts is None:
        return None
    out = {"summary": facts.summary(), "amd_gpu": facts.has_amd_gpu, "flags": sorted(facts.flags)}
    if not facts.has_amd_gpu:
        out["note"] = _data()["advice"]["not_here"]
    return out


def _compact(report: dict) -> dict:
    """The doctor's JSON without the empty fields (shorter to paste, nothing lost)."""
    env = report.get("environment") or {}
    return {
        **report,
        "environment": {k: v for k, v in env.items() if v is not None},
        "checks": [{k: v for k, v in c.items() if v is not None} for c in report["checks"]],
    }


def _unmatched(text: str, system: System | None, facts: MachineFacts | None) -> dict:
    """What a message nothing matches still gets: the recognised parts, the next
    commands, and the doctor's JSON with the message, ready to paste."""
    report = None
    if system is not None:
        try:
            report = _compact(diagnose(system, "auto", app=False).to_dict())
        except Exception as exc:  # the report must not hide the answer
            report = {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "recognised": recognise(text),
        "next_commands": _data()["unknown"]["commands"],
        "report": {"message": text[-4000:], "machine": _machine(facts), "doctor": report},
    }


def explain_text(
    message: str, system: System | None, read: Callable[[System], MachineFacts] = read_facts
) -> dict:
    """The answer to ``--explain MESSAGE`` as one JSON-ready dict."""
    facts = read(system) if system is not None else None
    rows = explain(message, facts.flags if facts else None)
    out = {"message": message, "machine": _machine(facts)}
    out["matches"] = [_as_dict(e, facts) for e in rows]
    if not rows:
        out["unmatched"] = _unmatched(message, system, facts)
    return out


def explain_file_text(
    name: str, text: str, system: System | None, read: Callable[[System], MachineFacts] = read_facts
) -> dict:
    """The answer to ``--explain-file LOG``: every known error with its line."""
    facts = read(system) if system is not None else None
    found: list[LogMatch] = explain_log(text, facts.flags if facts else None)
    out = {"file": name, "machine": _machine(facts)}
    out["matches"] = [
        {"line_no": m.line_no, "line": m.line, **_as_dict(m.error, facts)} for m in found
    ]
    if not found:
        out["unmatched"] = _unmatched(text, system, facts)
    return out


def _block(row: dict) -> str:
    text = format_row(row["title"], row["causes"], row["fixes"], row["source"], row["layer"])
    if row.get("here"):
        text += "\n  on this machine:\n" + "\n".join(f"    - {h}" for h in row["here"])
    return text


def _unmatched_text(result: dict, what: str) -> str:
    u = result["unmatched"]
    lines = [f"No known error matches {what}. What it shows:"]
    if u["recognised"]:
        lines += [f"  {k}: {', '.join(v)}" for k, v in u["recognised"].items()]
    else:
        lines.append("  no status code, library, gfx name or address")
    lines.append("Next, to see where it fails:")
    lines += [f"  - {c}" for c in u["next_commands"]]
    lines.append(
        "Report it (paste the block below into the issue, with the whole log if you have it):"
    )
    lines.append("```json\n" + json.dumps(u["report"], indent=1) + "\n```")
    return "\n".join(lines)


def _header(result: dict) -> list[str]:
    m = result.get("machine")
    if not m:
        return []
    return [f"This machine: {m['summary']}"] + ([m["note"]] if "note" in m else [])


def render_message(result: dict) -> str:
    """``explain_text``'s answer as the terminal shows it."""
    if not result["matches"]:
        return "\n".join([*_header(result), _unmatched_text(result, "that message")])
    head = _header(result)
    return "\n".join([*head, ""] if head else []) + "\n\n".join(map(_block, result["matches"]))


def render_file(result: dict) -> str:
    """``explain_file_text``'s answer as the terminal shows it."""
    name = "stdin" if result["file"] == "-" else result["file"]
    if not result["matches"]:
        return "\n".join([*_header(result), _unmatched_text(result, f"anything in {name}")])
    blocks = [f"line {r['line_no']}: {r['line']}\n{_block(r)}" for r in result["matches"]]
    title = f"{len(blocks)} known error(s) in {name}, first one first:"
    return "\n".join([*_header(result), title, ""]) + "\n\n".join(blocks)
