"""``python -m rlamd.train ENV``: train an agent (the DQN/training issue fills this in)."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m rlamd.train",
        description="Train an agent on ENV (e.g. breakout, BreakoutNoFrameskip-v4, cartpole).",
    )
    p.add_argument("env", help="environment name, e.g. breakout or cartpole")
    p.add_argument(
        "--device", default="auto", help="auto, cpu, cuda[:N], hip[:N], rocm[:N] (default: auto)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from rlamd.device import describe_device, resolve_device
    from rlamd.envs import make_env

    info = describe_device(resolve_device(args.device))
    env = make_env(args.env, num_envs=1, seed=0)
    print(f"device: {info.summary()}\nenv: {env.name} {env.single_observation_space.shape}")
    print("Training itself is not built yet (DQN/training issue).", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
