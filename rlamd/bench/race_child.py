"""A peer's side of a race: ``python -m rlamd.bench.race_child PEER --env ENV ...``.

Trains the peer with its recipe (its ``race_train``) and evaluates it on the race's
schedule with the race's protocol, the one rlamd's runner uses
(:func:`rlamd.evaluate.evaluate_policy` on rlamd's env: whole games, unclipped scores,
``10_000 + step`` as the env seed, episodes spread over up to 8 envs). The peer's policy
acts on those observations: DQN greedy with ``--eval-epsilon`` random actions, PPO
sampled from its policy. Each evaluation appends ``step,mean,std,episodes`` to
``DIR/evals.csv``, as rlamd's runner does, for the race to watch. SIGINT or SIGTERM
stops training at the peer's next chance; the process then exits 0 (3: the peer cannot
run here, with the reason on stderr).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .peer import PeerUnavailable, get

__all__ = ["Evaluations", "child_command", "main", "with_epsilon"]

Policy = Callable[[torch.Tensor], torch.Tensor]


class Evaluations:
    """The race's evaluation schedule and protocol, writing ``evals.csv`` like rlamd's."""

    def __init__(self, env: str, every: int, episodes: int, folder: Path) -> None:
        from rlamd.envs import AtariConfig, parse_env_id

        self.env, self.every, self.episodes = env, every, episodes
        self.atari = AtariConfig() if parse_env_id(env).family == "atari" else None
        self.due_at = every
        folder.mkdir(parents=True, exist_ok=True)
        self.csv = open(folder / "evals.csv", "w", encoding="utf-8", buffering=1)
        self.csv.write("step,mean,std,episodes\n")

    def maybe(self, step: int, policy: Policy) -> bool:
        """Evaluate when ``step`` reached the next multiple of ``every`` (then the next)."""
        if step < self.due_at:
            return False
        from rlamd.evaluate import evaluate_policy

        scores = evaluate_policy(
            policy, self.env, self.episodes, device=torch.device("cpu"), seed=10_000 + step,
            atari=self.atari,
        )  # fmt: skip
        mean, std = statistics.fmean(scores), statistics.pstdev(scores)
        self.csv.write(f"{step},{mean:.4f},{std:.4f},{len(scores)}\n")
        self.due_at = (step // self.every + 1) * self.every
        return True

    def close(self) -> None:
        self.csv.close()


def with_epsilon(actions: Any, epsilon: float, n: int, rng: np.random.Generator) -> torch.Tensor:
    """``actions`` with each replaced by a uniformly random one with probability ``epsilon``."""
    actions = np.asarray(actions)
    if epsilon > 0:
        random = rng.integers(0, n, len(actions))
        actions = np.where(rng.random(len(actions)) < epsilon, random, actions)
    return torch.as_tensor(actions)


def child_command(peer: str, proto: Any, algo: str, seed: int, folder: Path) -> list[str]:
    """The argv that runs ``peer``'s side of one race run in this interpreter."""
    from .race import eval_epsilon

    cmd = [sys.executable, "-m", "rlamd.bench.race_child", peer, "--env", proto.env]
    cmd += ["--algo", algo, "--eval-every", str(proto.eval_every)]
    cmd += ["--eval-episodes", str(proto.eval_episodes), "--threads", str(proto.threads)]
    cmd += ["--seed", str(seed), "--device", proto.device, "--dir", str(folder)]
    cmd += ["--eval-epsilon", str(eval_epsilon(proto.env, algo))]
    return [*cmd, "--steps", str(proto.steps)] if proto.steps else cmd


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rlamd.bench.race_child")
    p.add_argument(
        "peer", help="a registered peer's name (python -m rlamd.bench --help lists them)"
    )
    p.add_argument("--env", required=True, help="rlamd's env name (cartpole, pong ...)")
    p.add_argument("--algo", required=True, choices=("dqn", "ppo"))
    p.add_argument("--steps", type=int, default=0, help="run length (0: the recipe's)")
    p.add_argument("--eval-every", type=int, required=True)
    p.add_argument("--eval-episodes", type=int, required=True)
    p.add_argument("--eval-epsilon", type=float, default=0.0, help="DQN's evaluation epsilon")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dir", required=True, help="run folder: evals.csv goes here")
    p.add_argument("--peer-python", action="append", default=[], metavar="NAME=PATH")
    return p


def main(argv: list[str] | None = None) -> int:
    from .peer import set_python

    args = _parser().parse_args(argv)
    for spec in args.peer_python:
        set_python(spec)
    torch.set_num_threads(args.threads)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    evals = Evaluations(args.env, args.eval_every, args.eval_episodes, Path(args.dir))
    try:
        get(args.peer).race_train(args, stop, evals)  # type: ignore[attr-defined]
    except PeerUnavailable as exc:
        print(f"skipped: {exc}", file=sys.stderr)
        return 3
    finally:
        evals.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
