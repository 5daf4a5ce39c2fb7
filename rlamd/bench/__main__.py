"""``python -m rlamd.bench [SUITE ...] [--device DEV] [--quick] [--out DIR]``.

Measures rlamd on this machine, runs the installed peers in the same run, and writes a
table per suite, ``results.json`` (machine, versions, every figure with median, min, max
and repeats, the load other processes put on the machine during each suite) and a PNG
chart per suite. Warm-up runs are excluded; rlamd and its peers are timed in interleaved
rounds (at least 3), figures are medians and ratios are per round, with their range.
Suites: device, env, replay, learner, dqn, ppo, classic (PPO on CartPole against SB3),
rollout (Ray actors), allreduce, contention (PPO and DQN beside a busy process).
``python -m rlamd.bench race ENV --target SCORE`` races rlamd and its peers to a score
instead (``race --help``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from rlamd.device import DEVICE_HELP

from .common import MIN_REPEATS, Figure, machine_info
from .load import LoadMonitor, LoadReport

SUITES = (
    "device",
    "env",
    "replay",
    "learner",
    "dqn",
    "ppo",
    "classic",
    "rollout",
    "allreduce",
    "contention",
)

_SOURCE = "published figure quoted in the rlamd project brief (Atari iteration-speed table)"
# Published figures shown beside the measured ones; never mixed with them.
PUBLISHED = [
    {
        "name": "DQN iterations/s, BreakoutNoFrameskip-v4, batch 128",
        "hardware": "AMD Radeon RX 6800 XT",
        "median": 2150.0,
        "plus_minus": 120.0,
        "unit": "it/s",
        "source": _SOURCE,
    },
    {
        "name": "DQN iterations/s, BreakoutNoFrameskip-v4, batch 128",
        "hardware": "NVIDIA GeForce RTX 3080",
        "median": 2480.0,
        "plus_minus": 150.0,
        "unit": "it/s",
        "source": _SOURCE,
    },
]


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
        fig, axes = plt.subplots(
            len(by_unit),
            1,
            figsize=(8, 1.2 + 0.35 * len(figures) + 0.6 * len(by_unit)),
            squeeze=False,
        )
        for ax, (unit, figs) in zip(axes[:, 0], by_unit.items(), strict=True):
            names = [f.name.split("/", 1)[-1] for f in figs]
            ax.barh(
                names,
                [f.median for f in figs],
                xerr=[[f.median - f.min for f in figs], [f.max - f.median for f in figs]],
                color=[
                    "#c0392b"
                    if "rlamd" in f.name
                    or not any(p in f.name for p in ("sb3", "torchrl", "rllib", "numpy", "raw"))
                    else "#7f8c8d"
                    for f in figs
                ],
            )
            ax.set_xlabel(unit)
            ax.invert_yaxis()
            ax.grid(axis="x", alpha=0.3)
        axes[0, 0].set_title(f"rlamd bench: {suite} (median, min-max)")
        fig.tight_layout()
        path = out / f"{suite}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(str(path))
    return written


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with unknown suite names refused (naming the nearest)."""
    p = argparse.ArgumentParser(
        prog="python -m rlamd.bench", description=(__doc__ or "").split("\n\n")[1]
    )
    p.add_argument(
        "suites",
        nargs="*",
        default=[],
        help=f"any of: {', '.join(SUITES)} (default: all); or race ENV --target SCORE, "
        "a race to a score (race --help)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="fewer steps and repeats (each suite under two minutes on a 2-core CPU; "
        "contention about five)",
    )
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument(
        "--out", default="bench-out", help="folder for results.json and charts (default: bench-out)"
    )
    p.add_argument(
        "--no-peers",
        action="store_true",
        help="skip Stable-Baselines3 / TorchRL / RLlib even when installed",
    )
    args = p.parse_args(argv)
    for s in args.suites:
        if s not in SUITES:
            import difflib

            close = difflib.get_close_matches(s, SUITES, n=1)
            p.error(
                f"unknown suite '{s}'; accepted: {', '.join(SUITES)}"
                + (f". Did you mean '{close[0]}'?" if close else "")
            )
    return args


# One runner per suite: (device, quick, peers, notes) -> its figures, or None when the
# suite was skipped as a whole (no entry in results.json). Imports stay lazy so a suite's
# optional dependencies load only when it runs.
def _device_suite(device: torch.device, quick: bool, peers: bool, notes: list[str]):
    from .device import run_device_suite

    return run_device_suite(device, quick=quick, repeats=MIN_REPEATS if quick else 5)


def _env_suite(device: torch.device, quick: bool, peers: bool, notes: list[str]):
    from .env import run_env_suite

    return run_env_suite(steps=100 if quick else 400, repeats=MIN_REPEATS if quick else 5)


def _replay_suite(device: torch.device, quick: bool, peers: bool, notes: list[str]):
    from .replay import run_replay_suite

    return run_replay_suite(
        capacity=2**18 if quick else 2**20,
        iters=50 if quick else 200,
        repeats=MIN_REPEATS if quick else 5,
        device=device,
        peers=peers,
        notes=notes,
    )


def _learner_suite(device: torch.device, quick: bool, peers: bool, notes: list[str]):
    from .learner import run_learner_suite

    return run_learner_suite(
        device,
        batches=(32, 128) if quick else (32, 128, 512),
        iters=3 if quick else 10,
        repeats=MIN_REPEATS,
    )


def _dqn_suite(device: torch.device, quick: bool, peers: bool, notes: list[str]):
    from .dqn import run_dqn_suite

    return run_dqn_suite(
        batches=(128,) if quick else (32, 128),
        iters=15 if quick else 60,
        repeats=MIN_REPEATS,
        device=device,
        peers=peers,
        precisions=("auto",) if quick else ("auto", "fp32"),
        notes=notes,
    )


def _ppo_suite(device: torch.device, quick: bool, peers: bool, notes: list[str]):
    from .ppo import run_ppo_suite

    return run_ppo_suite(
        iters=1 if quick else 3,
        repeats=MIN_REPEATS,
        device=device,
        precisions=("auto",) if quick else ("auto", "fp32"),
        peers=peers,
        env_counts=(8,) if device.type == "cpu" else (8, 64),
        notes=notes,
    )


def _classic_suite(device: torch.device, quick: bool, peers: bool, notes: list[str]):
    from .classic import run_classic_suite

    return run_classic_suite(
        iters=2 if quick else 4, repeats=3 if quick else 7, device=device, peers=peers, notes=notes
    )


def _allreduce_suite(device: torch.device, quick: bool, peers: bool, notes: list[str]):
    from .allreduce import run_allreduce_suite

    return run_allreduce_suite(
        max_bytes=(16 if quick else 256) * 2**20, iters=5 if quick else 10, notes=notes
    )


def _contention_suite(device: torch.device, quick: bool, peers: bool, notes: list[str]):
    from .contention import run_contention_suite

    return run_contention_suite(
        seconds=6.0 if quick else 20.0, peers=peers, notes=notes, repeats=MIN_REPEATS
    )


def _rollout_suite(device: torch.device, quick: bool, peers: bool, notes: list[str]):
    from .rollout import run_rollout_suite

    figures = run_rollout_suite(rounds=2 if quick else 4, repeats=MIN_REPEATS, notes=notes)
    return figures or None  # skipped without Ray: no entry


_RUNNERS: dict[str, Callable[[torch.device, bool, bool, list[str]], list[Figure] | None]] = {
    "device": _device_suite,
    "env": _env_suite,
    "replay": _replay_suite,
    "learner": _learner_suite,
    "dqn": _dqn_suite,
    "ppo": _ppo_suite,
    "classic": _classic_suite,
    "rollout": _rollout_suite,
    "allreduce": _allreduce_suite,
    "contention": _contention_suite,
}


def _print_published(results: dict[str, list[Figure]]) -> None:
    """The published DQN figures beside rlamd's batch-128 iterations/s, when measured."""
    if "dqn" not in results:
        return
    print("\npublished figures (not measured here), BreakoutNoFrameskip-v4, batch 128:")
    ours = [f for f in results["dqn"] if f.name.endswith("/b128/iterations") and "rlamd" in f.name]
    for pub in PUBLISHED:
        mine = (
            f"; rlamd here: {ours[0].median:,.1f} it/s ({ours[0].median / pub['median']:.3f}x)"
            if ours
            else ""
        )
        print(
            f"  {pub['hardware']}: {pub['median']:,.0f} +/- {pub['plus_minus']:,.0f} "
            f"{pub['unit']}{mine}"
        )


def _run_suites(
    suites: list[str], device: torch.device, quick: bool, peers: bool, notes: list[str]
) -> tuple[dict[str, list[Figure]], dict[str, LoadReport]]:
    """Every suite with the machine's other load sampled before and during it; a busy
    machine gets a warning line after the suite's table."""
    results: dict[str, list[Figure]] = {}
    loads: dict[str, LoadReport] = {}
    gpu = (device.index or 0) if device.type == "cuda" else None
    for suite in suites:
        with LoadMonitor(gpu=gpu) as mon:
            figures = _RUNNERS[suite](device, quick, peers, notes)
        assert mon.report is not None
        warning = mon.report.warning(f"the {suite} suite")
        if warning:
            print(warning)
        if figures is not None:
            results[suite] = figures
            loads[suite] = mon.report
    return results, loads


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["race"]:
        from .race import main as race_main

        return race_main(argv[1:])
    args = _parse_args(argv)
    suites = args.suites or list(SUITES)
    from rlamd.hostalloc import tune_host_allocator

    tune_host_allocator()
    from rlamd.device import DeviceError, resolve_device

    try:
        device = resolve_device(args.device)
    except (DeviceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quick, peers = args.quick, not args.no_peers
    notes: list[str] = []
    t0 = time.perf_counter()
    results, loads = _run_suites(suites, device, quick, peers, notes)
    _print_published(results)
    charts = write_charts(out, results, notes)
    doc = {
        "machine": machine_info(device),
        "command": " ".join(["python -m rlamd.bench", *argv]),
        "quick": quick,
        "seconds": round(time.perf_counter() - t0, 1),
        "suites": {k: [f.to_dict() for f in v] for k, v in results.items()},
        "load": {k: v.to_dict() for k, v in loads.items()},
        "published": PUBLISHED,
        "notes": notes,
        "charts": charts,
    }
    (out / "results.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    for n in notes:
        print(f"note: {n}")
    busy = [k for k, v in loads.items() if v.busy]
    if busy:
        print(
            f"warning: the machine was busy during {', '.join(busy)} (other processes' load "
            "per suite is in results.json, 'load'); rerun on a quiet machine to compare"
        )
    print(
        f"\nwrote {out / 'results.json'}{' and ' + str(len(charts)) + ' charts' if charts else ''} "
        f"in {doc['seconds']:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
