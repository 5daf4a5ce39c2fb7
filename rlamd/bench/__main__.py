"""``python -m rlamd.bench [SUITE ...] [--quick]``: run benchmark suites and print tables."""

from __future__ import annotations

import argparse
import sys

import torch

SUITES = ("env", "replay", "dqn", "ppo")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlamd.bench", description=__doc__)
    p.add_argument("suites", nargs="*", default=list(SUITES), help=f"any of: {', '.join(SUITES)}")
    p.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda[:N], hip[:N], rocm[:N]")
    args = p.parse_args(argv)
    from rlamd.hostalloc import tune_host_allocator

    tune_host_allocator()
    for s in args.suites:
        if s not in SUITES:
            p.error(f"unknown suite '{s}'; accepted: {', '.join(SUITES)}")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    if "env" in args.suites:
        from .env import run_env_suite

        run_env_suite(steps=100 if args.quick else 400, repeats=3 if args.quick else 5)
    if "replay" in args.suites:
        from rlamd.device import resolve_device

        from .replay import run_replay_suite

        run_replay_suite(
            iters=50 if args.quick else 200,
            repeats=3 if args.quick else 5,
            device=resolve_device(args.device),
        )
    if "dqn" in args.suites:
        from rlamd.device import resolve_device

        from .dqn import run_dqn_suite

        run_dqn_suite(iters=20 if args.quick else 60, repeats=2 if args.quick else 3,
                      device=resolve_device(args.device))  # fmt: skip
    if "ppo" in args.suites:
        from rlamd.device import resolve_device

        from .ppo import run_ppo_suite

        run_ppo_suite(iters=1 if args.quick else 3, repeats=2 if args.quick else 3,
                      device=resolve_device(args.device))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
