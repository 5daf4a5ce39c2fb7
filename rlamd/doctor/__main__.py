"""``python -m rlamd.doctor [--device DEV] [--json] [--explain "<message>" | --explain-file LOG]``.

Lists the environment variables that pick the GPU and RCCL's network, walks hardware,
driver, runtime, framework, architecture, what a Ray run would meet (ROCR_VISIBLE_DEVICES,
NCCL_SOCKET_IFNAME) and a few real operations on the device, and says for anything not PASS
what to do. Exit status 0 when the selected device is usable. It never needs root, never
changes the system, and gives every external command a timeout.
"""

from __future__ import annotations

import argparse
import json
import sys

from rlamd.device import DEFAULT_HIP_ALLOC_CONF, DEVICE_HELP

from .checks import FAIL, LAYERS, PASS, SKIP, WARN, Report, diagnose
from .explainer import explain_file_text, explain_text, render_file, render_message
from .system import System

_COLOURS = {PASS: "\033[32m", WARN: "\033[33m", FAIL: "\033[31m", SKIP: "\033[90m"}


def format_report(report: Report, colour: bool) -> str:
    def tag(status: str) -> str:
        return f"{_COLOURS[status]}{status}\033[0m" if colour else status

    lines = [f"rlamd doctor: --device {report.device}"]
    if report.environment:
        lines.append("\nenvironment")
        for name, value in report.environment.items():
            if value is not None:
                lines.append(f"  {name}={value!r}")
        unset = [name for name, value in report.environment.items() if value is None]
        if unset:
            lines.append(f"  not set: {', '.join(unset)}")
        if report.environment.get("PYTORCH_HIP_ALLOC_CONF") is None:
            lines.append(f"  (on ROCm rlamd sets PYTORCH_HIP_ALLOC_CONF={DEFAULT_HIP_ALLOC_CONF})")
    for layer in LAYERS:
        checks = [c for c in report.checks if c.layer == layer]
        if not checks:
            continue
        lines.append(f"\n{layer}")
        for c in checks:
            ms = f" ({c.ms:.0f} ms)" if c.ms is not None else ""
            lines.append(f"  [{tag(c.status)}] {c.name}: {c.seen}{ms}")
            if c.fix and c.status != PASS:
                lines.append(f"         fix: {c.fix}")
    verdict = tag(PASS if report.usable else FAIL)
    lines.append(f"\nverdict [{verdict}] {report.verdict}")
    return "\n".join(lines)


def _explain(message: str, *, as_json: bool, system: System | None) -> int:
    """Print the known errors matching ``message`` with this machine's fixes; exit status
    0 when one matched, 1 when none did (then: what was recognised, the next commands and
    a report to paste)."""
    result = explain_text(message, system)
    print(json.dumps(result) if as_json else render_message(result))
    return 0 if result["matches"] else 1


def _explain_file(path: str, *, as_json: bool, system: System | None) -> int:
    """Every known error in a log file (``-``: stdin), first one first, with its line.

    Exit status 0 when one matched, 1 when none did, 2 when the file cannot be read.
    """
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
    except OSError as exc:
        print(
            f"error: --explain-file {path}: {exc.strerror or exc} (give a log file or -)",
            file=sys.stderr,
        )
        return 2
    result = explain_file_text(path, text, system)
    print(json.dumps(result) if as_json else render_file(result))
    return 0 if result["matches"] else 1


def main(argv: list[str] | None = None, system: System | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m rlamd.doctor", description=(__doc__ or "").split("\n\n")[1]
    )
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object (for bug reports)")
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--explain", metavar="MESSAGE", help="explain a pasted error message or log line"
    )
    what.add_argument(
        "--explain-file",
        metavar="LOG",
        help="find every known error in a log file (- for stdin), first one first, with its line",
    )
    p.add_argument("--no-app", action="store_true", help="skip the operations run on the device")
    p.add_argument(
        "--no-machine",
        action="store_true",
        help="with --explain/--explain-file: leave this machine's facts out (a log from elsewhere)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="seconds each external command may take (default: 5)",
    )
    args = p.parse_args(argv)
    here = None if args.no_machine else (system or System(timeout=args.timeout))
    if args.explain is not None:
        return _explain(args.explain, as_json=args.json, system=here)
    if args.explain_file is not None:
        return _explain_file(args.explain_file, as_json=args.json, system=here)
    try:
        report = diagnose(system or System(timeout=args.timeout), args.device, app=not args.no_app)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(format_report(report, colour=sys.stdout.isatty()))
    return 0 if report.usable else 1


if __name__ == "__main__":
    sys.exit(main())
