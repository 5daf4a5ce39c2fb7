"""Env steps/s of ``make_env`` against raw ``ale_py.vector_env.AtariVectorEnv``.

The raw C++ vector env is the ceiling: rlamd's pipeline adds episode bookkeeping,
life-loss detection and reward clipping on top, and must keep >= 0.9 of its speed. Both
run the same game with the same preprocessing, in the same process, interleaved; the
ratio is taken per round, with its range.
"""

from __future__ import annotations

import numpy as np

from .common import Contender, Figure, interleave, note_ratio, print_table, ratio, timed

__all__ = ["raw_env", "run_env_suite"]


def raw_env(game: str, n: int):
    """ale-py's vector env with rlamd's Atari preprocessing, no reward clipping or life loss."""
    from ale_py.vector_env import AtariVectorEnv

    from rlamd.envs import AtariConfig

    cfg = AtariConfig()
    return AtariVectorEnv(game, n, num_threads=0, autoreset_mode="SameStep", noop_max=cfg.noop_max,
                          frameskip=cfg.frame_skip, stack_num=cfg.frame_stack,
                          reward_clipping=False, episodic_life=False)  # fmt: skip


def _stepping(env, actions) -> Contender:
    def run() -> int:
        for a in actions:
            env.step(a)
        return len(actions) * len(actions[0])

    return run


def run_env_suite(game: str = "breakout", env_counts: tuple[int, ...] = (8, 16), steps: int = 400,
                  repeats: int = 5) -> list[Figure]:  # fmt: skip
    """Measure and print env steps/s for raw ALE and rlamd's ``make_env``."""
    from rlamd.envs import AtariConfig, make_env

    figures, rows = [], []
    for n in env_counts:
        # Same thread count for both: ALE's default of 0 lets the C++ env pick.
        raw, ours = raw_env(game, n), make_env(game, num_envs=n, atari=AtariConfig(num_threads=0))
        raw.reset(seed=0)
        ours.reset(seed=0)
        rng = np.random.default_rng(0)
        actions = [rng.integers(0, 4, n) for _ in range(steps)]
        f_raw, f_ours = interleave([
            Contender(f"env/raw_ale/{n}", "env steps/s", timed(_stepping(raw, actions)), {"num_envs": n}),
            Contender(f"env/rlamd/{n}", "env steps/s", timed(_stepping(ours, actions)), {"num_envs": n}),
        ], repeats=repeats)  # fmt: skip
        r = ratio(f_ours, f_raw)
        note_ratio(f_ours, "ratio_to_raw", r)
        figures += [f_raw, f_ours]
        rows.append((str(n), f"{f_raw.median:,.0f}", f"{f_ours.median:,.0f}", r.cell()))
        raw.close()
        ours.close()
    print(f"\nenv: {game}, env steps/s (median of {repeats} interleaved rounds, {steps} vector "
          "steps each; ratio: median per round, min-max)")  # fmt: skip
    print_table(rows, ("num_envs", "raw AtariVectorEnv", "rlamd make_env", "ratio"))
    return figures
