"""``python -m rlamd.bench [SUITE ...] [--device DEV] [--quick] [--out DIR]``.

Measures rlamd and the installed peers here in interleaved rounds after warm-up (medians;
ratios per round, with their range): a table and a chart per suite, and ``results.json``
(machine, versions, figures, others' load). ``race ENV --target SCORE``: a race
(``race --help``)."""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from rlamd.charts import new_chart, save_chart
from rlamd.device import DeviceError, resolve_device
from rlamd.hostalloc import tune_host_allocator
from rlamd.machine import machine_info

from .common import Figure, write_results
from .load import LoadMonitor
from .peer import load_toml, nearest, peer_arguments, peers, use_peer_python

PUBLISHED = load_toml(__package__, "published")["published"]
"""Published figures shown beside the measured ones; never mixed with them."""

_RUNNERS = load_toml(__package__, "suites")
"""suite -> {argument: [with --quick, without]}, in running order (``suites.toml``)."""
SUITES = tuple(_RUNNERS)
_MODULES = {"classic": "ppo", "env": "device", "rollout": "distributed", "allreduce": "distributed"}


def _run(suite: str, device: torch.device, quick: bool, use_peers: bool, notes: list) -> list:
    """``run_SUITE_suite``'s figures (in ``SUITE.py`` or :data:`_MODULES`' module)."""
    module = importlib.import_module(f"rlamd.bench.{_MODULES.get(suite, suite)}")
    fn = getattr(module, f"run_{suite}_suite")
    kwargs = {k: v[0] if quick else v[1] for k, v in _RUNNERS[suite].items()}
    if suite == "ppo":
        kwargs["env_counts"] = (8,) if device.type == "cpu" else (8, 64)
    given = {"device": device, "peers": use_peers, "notes": notes}
    kwargs |= {k: v for k, v in given.items() if k in inspect.signature(fn).parameters}
    return fn(**kwargs)


def write_charts(out: Path, results: dict[str, list[Figure]], notes: list[str]) -> list[str]:
    """A horizontal bar per figure (median, min-max), one panel per unit; rlamd's red."""
    others = (*(p.name for p in peers()), "numpy", "raw")
    written = []
    for suite, figures in results.items():
        units = list(dict.fromkeys(f.unit for f in figures))
        got = new_chart(len(units), 1, (8, 1.2 + 0.35 * len(figures) + 0.6 * len(units)))
        if got is None:
            notes.append("matplotlib not installed: charts skipped (bash scripts/setup.sh --bench)")
            return []
        fig, axes = got
        for ax, unit in zip(axes[:, 0], units, strict=True):
            figs = [f for f in figures if f.unit == unit]
            parts = [f.name.split("/", 1)[-1] for f in figs]
            grey = [p.split("/")[0].startswith(others) and not p.startswith("rlamd") for p in parts]
            colours = ["#7f8c8d" if g else "#c0392b" for g in grey]
            spread = [[f.median - f.min for f in figs], [f.max - f.median for f in figs]]
            ax.barh(parts, [f.median for f in figs], color=colours, xerr=spread)
            ax.set_xlabel(unit)
            ax.invert_yaxis()
            ax.grid(axis="x", alpha=0.3)
        axes[0, 0].set_title(f"rlamd bench: {suite} (median, min-max)")
        written.append(save_chart(fig, out / f"{suite}.png"))
    return written


def _parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line, with unknown suite names refused (naming the nearest)."""
    p = argparse.ArgumentParser(prog="python -m rlamd.bench", description=__doc__.split("\n\n")[1])
    what = f"any of: {', '.join(SUITES)} (default: all); or race ENV --target SCORE, a race to "
    p.add_argument("suites", nargs="*", default=[], help=what + "a score (race --help)")
    what = "fewer steps and repeats (each suite under two minutes on a 2-core CPU; contention "
    p.add_argument("--quick", action="store_true", help=what + "about five)")
    skip = f"skip the peers ({', '.join(p.name for p in peers())}) even when installed"
    peer_arguments(p, skip, "bench-out")
    args = p.parse_args(argv)
    for s in (s for s in args.suites if s not in SUITES):
        p.error(nearest("suite", s, SUITES))
    use_peer_python(args, p)
    return args


def _print_published(results: dict[str, list[Figure]]) -> None:
    """The published DQN figures beside rlamd's batch-128 iterations/s, when measured."""
    if "dqn" not in results:
        return
    print("\npublished figures (not measured here), BreakoutNoFrameskip-v4, batch 128:")
    ours = [f for f in results["dqn"] if re.fullmatch(r"dqn/rlamd[^/]*/b128/iterations", f.name)]
    for pub in PUBLISHED:
        ratio = ours[0].median / pub["median"] if ours else 0
        mine = f"; rlamd here: {ours[0].median:,.1f} it/s ({ratio:.3f}x)" if ours else ""
        print(f"  {pub['hardware']}: {pub['median']:,.0f} +/- {pub['plus_minus']:,.0f} it/s{mine}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["race"]:
        from .race import main as race_main

        return race_main(argv[1:])
    args = _parse_args(argv)
    tune_host_allocator()
    try:
        device = resolve_device(args.device)
    except (DeviceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    t0, results, loads = time.perf_counter(), {}, {}
    for suite in args.suites or SUITES:  # the machine's other load sampled around each suite
        with LoadMonitor(gpu=(device.index or 0) if device.type == "cuda" else None) as mon:
            figures = _run(suite, device, args.quick, not args.no_peers, notes)
        if warning := mon.report.warning(f"the {suite} suite"):
            print(warning)
        results[suite], loads[suite] = figures, mon.report
    _print_published(results)
    charts = write_charts(out, results, notes)
    doc = {"machine": machine_info(device), "command": " ".join(["python -m rlamd.bench", *argv])}
    doc |= {"quick": args.quick, "seconds": round(time.perf_counter() - t0, 1)}
    doc |= {"suites": {k: [asdict(f) for f in v] for k, v in results.items()}}
    doc |= {"load": {k: v.to_dict() for k, v in loads.items()}, "published": PUBLISHED}
    doc |= {"notes": notes, "charts": charts}
    busy = ", ".join(f"the {k} suite" for k, v in loads.items() if v.busy)
    write_results(out, doc, busy, "each suite's load is in results.json, 'load'; rerun quiet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
