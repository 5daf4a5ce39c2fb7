"""A peer's side of a race, ``python -m rlamd.bench.race_child PEER --env ENV ...``: its
``race_train``, evaluated on the race's schedule as rlamd's runner evaluates (rlamd's env,
:func:`rlamd.evaluate.eval_seed`), appended to ``DIR/evals.csv``. SIGINT or SIGTERM stops it at the
peer's next chance; exit 0 (3: the peer cannot run here)."""

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

from rlamd.envs import AtariConfig, parse_env_id
from rlamd.evaluate import eval_seed, evaluate_policy

from .peer import PeerUnavailable, get, use_peer_python

__all__ = ["Evaluations", "main"]


class Evaluations:
    """The race's evaluation schedule and protocol, writing ``evals.csv`` like rlamd's."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.env, self.every, self.episodes = args.env, args.eval_every, args.eval_episodes
        self.atari = AtariConfig() if parse_env_id(args.env).family == "atari" else None
        self.epsilon, self.due_at = args.eval_epsilon, self.every
        self.seed, self.rng = args.seed, np.random.default_rng(args.seed)
        Path(args.dir).mkdir(parents=True, exist_ok=True)
        self.csv = open(Path(args.dir) / "evals.csv", "w", encoding="utf-8", buffering=1)
        self.csv.write("step,mean,std,episodes\n")

    def maybe(self, step: int, policy: Callable[[torch.Tensor], torch.Tensor]) -> bool:
        """Evaluate when ``step`` reached the next multiple of ``every`` (then the next)."""
        if step < self.due_at:
            return False
        seed = eval_seed(self.seed, step)
        opts = {"device": torch.device("cpu"), "seed": seed, "atari": self.atari}
        scores = evaluate_policy(policy, self.env, self.episodes, **opts)
        mean, std = statistics.fmean(scores), statistics.pstdev(scores)
        self.csv.write(f"{step},{mean:.4f},{std:.4f},{len(scores)}\n")
        self.due_at = (step // self.every + 1) * self.every
        return True

    def explore(self, actions: Any, n: int) -> torch.Tensor:
        """``actions``, each replaced by a uniform one of ``n`` with the DQN epsilon."""
        actions = np.asarray(actions)
        if self.epsilon > 0:
            random = self.rng.integers(0, n, len(actions))
            actions = np.where(self.rng.random(len(actions)) < self.epsilon, random, actions)
        return torch.as_tensor(actions)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlamd.bench.race_child")
    p.add_argument("peer", help="a registered peer's name")
    p.add_argument("--env", required=True, help="rlamd's env name (cartpole, pong ...)")
    p.add_argument("--algo", required=True, choices=("dqn", "ppo"))
    p.add_argument("--dir", required=True, help="run folder: evals.csv goes here")
    for flag in ("--eval-every", "--eval-episodes", "--threads"):
        p.add_argument(flag, type=int, required=True)
    p.add_argument("--steps", type=int, default=0, help="run length (0: the recipe's)")
    p.add_argument("--eval-epsilon", type=float, default=0.0, help="DQN's evaluation epsilon")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--peer-python", action="append", default=[], metavar="NAME=PATH")
    args, stop, evals = p.parse_args(argv), threading.Event(), None
    use_peer_python(args, p)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if (reason := get(args.peer).unavailable()) is not None:
            raise PeerUnavailable(reason)
        torch.set_num_threads(args.threads)
        evals = Evaluations(args)
        get(args.peer).race_train(args, stop, evals)
    except PeerUnavailable as exc:
        print(f"skipped: {exc}", file=sys.stderr)
        return 3
    finally:
        if evals is not None:
            evals.csv.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
