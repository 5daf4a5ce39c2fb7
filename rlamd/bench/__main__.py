"""``python -m rlamd.bench [SUITE ...] [--device DEV] [--quick] [--out DIR]``.

Measures rlamd on this machine, runs the registered peers that are installed in the same
run, and writes a table per suite, ``results.json`` (machine, versions, every figure with
median, min, max and repeats, the load other processes put on the machine during each
suite) and a PNG chart per suite. Warm-up runs are excluded; rlamd and its peers are
timed in interleaved rounds (at least 3), figures are medians and ratios are per round,
with their range. Suites: device, env, replay, learner, dqn, ppo, classic (PPO on
CartPole), rollout (Ray actors), allreduce, contention (PPO and DQN beside a busy
process). ``python -m rlamd.bench race ENV --target SCORE`` races rlamd and its peers to
a score instead (``race --help``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

import torch

from rlamd.device import DEVICE_HELP

from .common import MIN_REPEATS, Figure, machine_info
from .load import LoadMonitor
from .peer import peers, set_python

_SOURCE = "published figure quoted in the rlamd project brief (Atari iteration-speed table)"
# Published figures shown beside the measured ones; never mixed with them.
PUBLISHED = [
    {"name": "DQN iterations/s, BreakoutNoFrameskip-v4, batch 128", "hardware": hw, "median": m,
     "plus_minus": pm, "unit": "it/s", "source": _SOURCE}
    for hw, m, pm in (("AMD Radeon RX 6800 XT", 2150.0, 120.0), ("NVIDIA GeForce RTX 3080", 2480.0, 150.0))
]  # fmt: skip

# suite -> (module, function, keyword arguments for (quick, device)); every compared figure
# gets at least MIN_REPEATS interleaved rounds.
R = MIN_REPEATS
_RUNNERS = {
    "device": ("device", "run_device_suite", lambda q, d: {"quick": q, "repeats": R if q else 5}),
    "env": ("env", "run_env_suite", lambda q, d: {"steps": 100 if q else 400, "repeats": R if q else 5}),
    "replay": ("replay", "run_replay_suite", lambda q, d: {
        "capacity": 2**18 if q else 2**20, "iters": 50 if q else 200, "repeats": R if q else 5}),
    "learner": ("learner", "run_learner_suite", lambda q, d: {
        "batches": (32, 128) if q else (32, 128, 512), "iters": 3 if q else 10, "repeats": R}),
    "dqn": ("dqn", "run_dqn_suite", lambda q, d: {
        "batches": (128,) if q else (32, 128), "iters": 15 if q else 60, "repeats": R,
        "precisions": ("auto",) if q else ("auto", "fp32")}),
    "ppo": ("ppo", "run_ppo_suite", lambda q, d: {
        "iters": 1 if q else 3, "repeats": R, "precisions": ("auto",) if q else ("auto", "fp32"),
        "env_counts": (8,) if d.type == "cpu" else (8, 64)}),
    "classic": ("ppo", "run_classic_suite", lambda q, d: {"iters": 2 if q else 4, "repeats": 3 if q else 7}),
    "rollout": ("rollout", "run_rollout_suite", lambda q, d: {"rounds": 2 if q else 4, "repeats": R}),
    "allreduce": ("allreduce", "run_allreduce_suite", lambda q, d: {
        "max_bytes": (16 if q else 256) * 2**20, "iters": 5 if q else 10}),
    "contention": ("contention", "run_contention_suite", lambda q, d: {
        "seconds": 6.0 if q else 20.0, "repeats": R}),
}  # fmt: skip
SUITES = tuple(_RUNNERS)
_TAKES = {"device": ("device",), "env": (), "learner": ("device",), "rollout": ("notes",),
          "allreduce": ("notes",), "contention": ("peers", "notes")}  # fmt: skip


def _run(suite: str, device: torch.device, quick: bool, use_peers: bool, notes: list[str]):
    """One suite's figures, or None when it was skipped as a whole (no results entry)."""
    module, func, kwargs = _RUNNERS[suite]
    fn = getattr(importlib.import_module(f"rlamd.bench.{module}"), func)
    given = {"device": device, "peers": use_peers, "notes": notes}
    takes = _TAKES.get(suite, ("device", "peers", "notes"))
    figures = fn(**{k: v for k, v in given.items() if k in takes}, **kwargs(quick, device))
    return figures or None if suite == "rollout" else figures


def _colour(name: str) -> str:
    """rlamd's bars red; peers' and baselines' grey."""
    part = name.split("/")[1] if "/" in name else name
    others = (*(p.name for p in peers()), "numpy", "raw")
    return "#7f8c8d" if part.startswith(others) and not part.startswith("rlamd") else "#c0392b"


def write_charts(out: Path, results: dict[str, list[Figure]], notes: list[str]) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        notes.append("matplotlib not installed: charts skipped (bash scripts/setup.sh --bench)")
        return []
    written = []
    for suite, figures in results.items():
        by_unit: dict[str, list[Figure]] = {}
        for f in figures:
            by_unit.setdefault(f.unit, []).append(f)
        size = (8, 1.2 + 0.35 * len(figures) + 0.6 * len(by_unit))
        fig, axes = plt.subplots(len(by_unit), 1, figsize=size, squeeze=False)
        for ax, (unit, figs) in zip(axes[:, 0], by_unit.items(), strict=True):
            ax.barh([f.name.split("/", 1)[-1] for f in figs], [f.median for f in figs],
                    xerr=[[f.median - f.min for f in figs], [f.max - f.median for f in figs]],
                    color=[_colour(f.name) for f in figs])  # fmt: skip
            ax.set_xlabel(unit)
            ax.invert_yaxis()
            ax.grid(axis="x", alpha=0.3)
        axes[0, 0].set_title(f"rlamd bench: {suite} (median, min-max)")
        fig.tight_layout()
        fig.savefig(out / f"{suite}.png", dpi=110)
        plt.close(fig)
        written.append(str(out / f"{suite}.png"))
    return written


def _parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line, with unknown suite names refused (naming the nearest)."""
    p = argparse.ArgumentParser(
        prog="python -m rlamd.bench", description=(__doc__ or "").split("\n\n")[1]
    )
    p.add_argument("suites", nargs="*", default=[], help=f"any of: {', '.join(SUITES)} (default: "
                   "all); or race ENV --target SCORE, a race to a score (race --help)")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="fewer steps and repeats (each suite "
                   "under two minutes on a 2-core CPU; contention about five)")  # fmt: skip
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument(
        "--out", default="bench-out", help="folder for results.json and charts (default: bench-out)"
    )
    p.add_argument(
        "--no-peers",
        action="store_true",
        help=f"skip the peers ({', '.join(p.name for p in peers())}) even when installed",
    )
    p.add_argument("--peer-python", action="append", default=[], metavar="NAME=PATH",
                   help="run peer NAME's processes under this interpreter")  # fmt: skip
    args = p.parse_args(argv)
    for s in args.suites:
        if s not in SUITES:
            import difflib

            close = difflib.get_close_matches(s, SUITES, n=1)
            p.error(f"unknown suite '{s}'; accepted: {', '.join(SUITES)}"
                    + (f". Did you mean '{close[0]}'?" if close else ""))  # fmt: skip
    for spec in args.peer_python:
        try:
            set_python(spec)
        except ValueError as exc:
            p.error(str(exc))
    return args


def _print_published(results: dict[str, list[Figure]]) -> None:
    """The published DQN figures beside rlamd's batch-128 iterations/s, when measured."""
    if "dqn" not in results:
        return
    print("\npublished figures (not measured here), BreakoutNoFrameskip-v4, batch 128:")
    ours = [
        f
        for f in results["dqn"]
        if f.name.endswith("/b128/iterations") and f.name.startswith("dqn/rlamd")
    ]
    for pub in PUBLISHED:
        mine = (
            f"; rlamd here: {ours[0].median:,.1f} it/s ({ours[0].median / pub['median']:.3f}x)"
            if ours
            else ""
        )
        print(
            f"  {pub['hardware']}: {pub['median']:,.0f} +/- {pub['plus_minus']:,.0f} {pub['unit']}{mine}"
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["race"]:
        from .race import main as race_main

        return race_main(argv[1:])
    args = _parse_args(argv)
    from rlamd.device import DeviceError, resolve_device
    from rlamd.hostalloc import tune_host_allocator

    tune_host_allocator()
    try:
        device = resolve_device(args.device)
    except (DeviceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    t0 = time.perf_counter()
    results, loads = {}, {}
    gpu = (device.index or 0) if device.type == "cuda" else None
    for suite in args.suites or SUITES:  # the machine's other load sampled around each suite
        with LoadMonitor(gpu=gpu) as mon:
            figures = _run(suite, device, args.quick, not args.no_peers, notes)
        if warning := mon.report.warning(f"the {suite} suite"):
            print(warning)
        if figures is not None:
            results[suite], loads[suite] = figures, mon.report
    _print_published(results)
    charts = write_charts(out, results, notes)
    doc = {
        "machine": machine_info(device), "command": " ".join(["python -m rlamd.bench", *argv]),
        "quick": args.quick, "seconds": round(time.perf_counter() - t0, 1),
        "suites": {k: [f.to_dict() for f in v] for k, v in results.items()},
        "load": {k: v.to_dict() for k, v in loads.items()}, "published": PUBLISHED,
        "notes": notes, "charts": charts,
    }  # fmt: skip
    (out / "results.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    for n in notes:
        print(f"note: {n}")
    if busy := [k for k, v in loads.items() if v.busy]:
        print(f"warning: the machine was busy during {', '.join(busy)} (other processes' load "
              "per suite is in results.json, 'load'); rerun on a quiet machine to compare")  # fmt: skip
    more = f" and {len(charts)} charts" if charts else ""
    print(f"\nwrote {out / 'results.json'}{more} in {doc['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
