"""The child side of the contention suite: one condition, built once, measured on request.

``python -m rlamd.bench.contention_child --serve ALGO MODE [--env ENV]`` builds the loop
``python -m rlamd.train`` runs (or SB3's), prints ``{"ready": true, ...}``, then answers
each ``measure SECONDS`` line on stdin with one JSON line ``{"rate": ...}`` until ``quit``.
``--child ALGO MODE --seconds S`` measures once and prints ``{"rates": [...]}``.
See :mod:`rlamd.bench.contention` for the conditions.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from typing import Any

__all__ = ["ALGOS", "GAME", "MODES", "NUM_ENVS", "run_child", "serve"]

GAME = "breakout"
ALGOS = ("ppo", "dqn")
MODES = ("budget", "untuned", "sb3")
NUM_ENVS = 8


def _rlamd_iterate(algo: str, env_name: str, num_envs: int, threads: int | None, warm: int):
    """Build the loop ``python -m rlamd.train`` runs; returns (iterate() -> env steps, close)."""
    import torch

    from rlamd.agents.dqn import DQNConfig
    from rlamd.algos import build_agent, get_algorithm
    from rlamd.collector import Collector
    from rlamd.config.sections import RunConfig, TrainConfig
    from rlamd.envs import make_env

    device = torch.device("cpu")
    env = make_env(env_name, num_envs=num_envs, threads=threads)
    train = TrainConfig(
        env=env_name,
        algo=algo,
        num_envs=num_envs,
        device="cpu",
        precision="fp32",
        steps=10_000_000,
        threads=threads,
    )
    cfg = RunConfig(train=train, dqn=replace(DQNConfig(), learning_starts=warm, buffer_size=50_000))
    agent = build_agent(cfg, device, env)
    collector = Collector(env, device, seed=0)
    loop = get_algorithm(algo).local_loop(cfg, collector, agent, 0, lambda _text: None)
    while loop.step < warm and algo == "dqn":
        loop.iterate()

    def iterate() -> int:
        before = loop.step
        loop.iterate()
        return loop.step - before

    return iterate, collector.close


def _sb3_iterate(algo: str, num_envs: int, warm: int):
    """SB3's PPO or DQN with rlamd's settings; returns (iterate() -> env steps, close)."""
    from rlamd.bench.peers import sb3_atari

    if algo == "ppo":
        model = sb3_atari("ppo", num_envs, "cpu")
        per = 128 * num_envs
    else:
        # train_freq counts vector steps: num_envs / 4 updates per vector step, as rlamd.
        model = sb3_atari("dqn", num_envs, "cpu", warm=warm, per_update=max(1, num_envs // 4))
        model.learn(total_timesteps=warm)
        per = 16 * num_envs

    def iterate() -> int:
        model.learn(total_timesteps=per, reset_num_timesteps=False)
        return per

    return iterate, model.get_env().close


def _build(algo: str, mode: str, env_name: str, num_envs: int, warm: int):
    """(iterate() -> env steps, close, thread line) for one condition, in this process."""
    import torch

    threads: int | None = None
    line = f"torch {torch.get_num_threads()}, ale-py default, OpenMP default"
    watch = None
    if mode == "budget":
        from rlamd.threads import LoadWatch, apply_threads, describe, plan_threads

        # As rlamd.engine.LocalEngine does on a CPU with the default budget.
        plan = plan_threads(None, num_envs)
        apply_threads(plan)
        threads, line = plan.env_threads, describe(plan).removeprefix("rlamd: ")
        watch = LoadWatch(plan)
        line += "; torch threads follow the load"
    if mode == "sb3":
        iterate, close = _sb3_iterate(algo, num_envs, warm)
    else:
        iterate, close = _rlamd_iterate(algo, env_name, num_envs, threads, warm)
    if watch is not None:
        step_once = iterate

        def iterate() -> int:
            watch.update()
            return step_once()

    return iterate, close, line


def _window(iterate, seconds: float) -> float:
    """One untimed iteration, then env steps/s over ``seconds`` of wall time."""
    iterate()  # first-call allocations, kernel selection, caches after an idle wait
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        done += iterate()
    return done / (time.perf_counter() - t0)


def run_child(
    algo: str,
    mode: str,
    seconds: float,
    *,
    env_name: str = GAME,
    num_envs: int = NUM_ENVS,
    warm: int = 1_000,
    chunks: int = 3,
) -> dict[str, Any]:
    """Measure one condition in this process: env steps/s over ``chunks`` equal windows.

    Args:
        algo: ``ppo`` or ``dqn``.
        mode: ``budget`` (rlamd's thread plan), ``untuned`` (library defaults) or ``sb3``.
        seconds: timed wall time, split into the windows (each after an untimed iteration).
        env_name: the game (``cartpole`` keeps the tests fast; SB3 always plays Breakout).
        num_envs: envs stepped together.
        warm: DQN replay fill before the timing starts.
        chunks: the timed windows; their rates are the repeats.

    Returns:
        ``{"rates": [...], "threads": "..."}``: env steps/s per window and the thread setup.
    """
    iterate, close, line = _build(algo, mode, env_name, num_envs, warm)
    try:
        rates = [_window(iterate, seconds / chunks) for _ in range(chunks)]
    finally:
        close()
    return {"rates": rates, "threads": line}


def serve(algo: str, mode: str, env_name: str, num_envs: int = NUM_ENVS, warm: int = 1_000):
    """The child's loop: build once, say ``{"ready": ...}``, then one JSON line per
    ``measure SECONDS`` line read from stdin, until ``quit`` or the end of stdin."""
    iterate, close, line = _build(algo, mode, env_name, num_envs, warm)
    try:
        print(json.dumps({"ready": True, "threads": line}), flush=True)
        for command in sys.stdin:
            word, *rest = command.split()
            if word == "quit":
                break
            rate = _window(iterate, float(rest[0]))
            print(json.dumps({"rate": rate, "threads": line}), flush=True)
    finally:
        close()


def main(argv: list[str] | None = None) -> int:
    """The child entries: ``--serve ALGO MODE`` (the suite's) or ``--child ALGO MODE`` (one
    measurement of ``--seconds``, printed as one JSON line)."""
    p = argparse.ArgumentParser(prog="python -m rlamd.bench.contention_child")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--child", nargs=2, metavar=("ALGO", "MODE"))
    how.add_argument("--serve", nargs=2, metavar=("ALGO", "MODE"))
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--env", default=GAME)
    args = p.parse_args(argv)
    algo, mode = args.child or args.serve
    if algo not in ALGOS or mode not in MODES:
        p.error(f"{algo} {mode}; accepted: ALGO in {', '.join(ALGOS)}, MODE in {', '.join(MODES)}")
    if args.serve:
        serve(algo, mode, args.env)
    else:
        print(json.dumps(run_child(algo, mode, args.seconds, env_name=args.env)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
