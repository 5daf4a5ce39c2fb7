"""Env steps/s of ``make_env`` against raw ``ale_py.vector_env.AtariVectorEnv``, the
ceiling: rlamd's bookkeeping, life-loss and reward clipping must keep >= 0.9 of its speed
(same game and preprocessing, one process, interleaved)."""

from __future__ import annotations

import numpy as np

from .common import Contender, Figure, interleave, ratio, report, timed

__all__ = ["raw_env", "run_env_suite", "stepping"]


def raw_env(game: str, n: int):
    """ale-py's vector env with rlamd's Atari preprocessing, no reward clipping or life loss."""
    from ale_py.vector_env import AtariVectorEnv

    from rlamd.envs import AtariConfig

    cfg = AtariConfig()
    opts = {"noop_max": cfg.noop_max, "frameskip": cfg.frame_skip, "stack_num": cfg.frame_stack}
    opts |= {"num_threads": 0, "autoreset_mode": "SameStep"}
    return AtariVectorEnv(game, n, reward_clipping=False, episodic_life=False, **opts)


def stepping(env, actions: list, work: int):
    def run() -> int:
        for a in actions:
            env.step(a)
        return work

    return run


def run_env_suite(steps: int = 400, repeats: int = 5, game: str = "breakout") -> list[Figure]:
    from rlamd.envs import AtariConfig, make_env

    figures, rows = [], []
    for n in (8, 16):
        # Same thread count for both: ALE's default of 0 lets the C++ env pick.
        envs = {
            "raw_ale": raw_env(game, n),
            "rlamd": make_env(game, n, atari=AtariConfig(num_threads=0)),
        }
        rng = np.random.default_rng(0)
        actions = [rng.integers(0, 4, n) for _ in range(steps)]
        contenders = []
        for who, env in envs.items():
            env.reset(seed=0)
            run = timed(stepping(env, actions, steps * n))
            contenders.append(Contender(f"env/{who}/{n}", "env steps/s", run, {"num_envs": n}))
        raw, ours = interleave(contenders, repeats=repeats)
        r = ratio(ours, raw, "ratio_to_raw")
        figures += [raw, ours]
        rows.append((str(n), f"{raw.median:,.0f}", f"{ours.median:,.0f}", r.cell()))
        for env in envs.values():
            env.close()
    head = (
        f"env: {game}, env steps/s (median of {repeats} interleaved rounds, {steps} vector "
        "steps each; ratio: median per round, min-max)"
    )
    report(head, rows, ("num_envs", "raw AtariVectorEnv", "rlamd make_env", "ratio"))
    return figures
