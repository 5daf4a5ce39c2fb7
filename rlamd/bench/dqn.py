"""DQN iterations/s on Breakout and pure learner updates/s, rlamd against SB3.

An *iteration* (the Atari iteration-speed table) is one update on a batch sampled from
prioritized replay plus the env steps collected for it: here one env, one update per env
step (train frequency 1). rlamd runs :class:`rlamd.loops.OffPolicyLoop`, the loop
``python -m rlamd.train`` runs; Stable-Baselines3's DQN runs with the same batch size,
train frequency, network (Nature CNN) and 1 env, in the same process, after both
buffers hold the same number of warm-up transitions.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from .common import Figure, measure, print_table
from .peers import PeerUnavailable, sb3

__all__ = ["run_dqn_suite"]

GAME = "breakout"
GYM_ID = "BreakoutNoFrameskip-v4"


def _rlamd_setup(batch: int, precision: str, device: torch.device, warm: int):
    from rlamd.agents.dqn import DQNConfig
    from rlamd.collector import Collector
    from rlamd.envs import AtariConfig, make_env
    from rlamd.loops import OffPolicyLoop
    from rlamd.train import TrainConfig, build_agent, build_replay

    cfg = replace(
        DQNConfig(), batch_size=batch, train_frequency=1, learning_starts=warm, buffer_size=50_000
    )
    train = TrainConfig(
        env=GAME, num_envs=1, precision=precision, device=str(device), steps=10_000_000
    )
    env = make_env(GAME, num_envs=1)
    sections = {"train": train, "dqn": cfg, "atari": AtariConfig()}
    agent, _ = build_agent(sections, device, env=env)
    buf = build_replay(cfg, env, device, seed=0)
    loop = OffPolicyLoop(Collector(env, device, seed=0), buf, agent, cfg, train.steps)
    while loop.step < warm:
        loop.iterate()
    return loop, agent


def _sb3_setup(batch: int, warm: int):
    module = sb3()
    import ale_py
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    env = VecFrameStack(make_atari_env(GYM_ID, n_envs=1, seed=0), n_stack=4)
    model = module.DQN(
        "CnnPolicy", env, buffer_size=50_000, learning_starts=warm, batch_size=batch, train_freq=1,
        gradient_steps=1, target_update_interval=2_000, device="cpu", verbose=0, seed=0,
    )  # fmt: skip
    model.learn(total_timesteps=warm)
    return model


def run_dqn_suite(
    batches: tuple[int, ...] = (32, 128),
    iters: int = 60,
    repeats: int = 3,
    device: torch.device | str = "cpu",
    precisions: tuple[str, ...] = ("auto", "fp32"),
    warm: int = 1_000,
    peers: bool = True,
    notes: list[str] | None = None,
) -> list[Figure]:
    device = torch.device(device)
    figures: list[Figure] = []
    notes = [] if notes is None else notes
    rows = []
    for batch in batches:
        base: Figure | None = None
        for precision in precisions:
            loop, agent = _rlamd_setup(batch, precision, device, warm)
            mode = agent.precision.mode

            def iterate(loop=loop) -> int:
                for _ in range(iters):
                    loop.iterate()
                return iters

            def learn(loop=loop) -> int:
                for _ in range(iters):
                    loop.learn(beta=0.4)
                return iters

            f_it = measure(f"dqn/rlamd_{mode}/b{batch}/iterations", "it/s", iterate, repeats=repeats, device=device,
                           batch=batch, precision=mode)  # fmt: skip
            f_up = measure(f"dqn/rlamd_{mode}/b{batch}/learner", "updates/s", learn, repeats=repeats, device=device,
                           batch=batch, precision=mode)  # fmt: skip
            figures += [f_it, f_up]
            base = base or f_it
            rows.append((f"rlamd ({mode})", str(batch), f"{f_it.median:.1f}", f"{f_up.median:.1f}",
                         f"{f_it.median / base.median:.2f}"))  # fmt: skip
            loop.collector.close()
        if not peers:
            continue
        try:
            model = _sb3_setup(batch, warm)
        except PeerUnavailable as exc:
            notes.append(f"Stable-Baselines3 skipped: {exc}")
            continue

        def sb3_iterate(model=model) -> int:
            model.learn(total_timesteps=iters, reset_num_timesteps=False)
            return iters

        def sb3_learn(model=model, batch=batch) -> int:
            model.train(gradient_steps=iters, batch_size=batch)
            return iters

        f_it = measure(
            f"dqn/sb3_fp32/b{batch}/iterations", "it/s", sb3_iterate, repeats=repeats, batch=batch
        )
        f_up = measure(
            f"dqn/sb3_fp32/b{batch}/learner", "updates/s", sb3_learn, repeats=repeats, batch=batch
        )
        figures += [f_it, f_up]
        assert base is not None
        ratio = base.median / f_it.median
        base.meta["ratio_to_sb3"] = ratio
        rows.append(("SB3 DQN (fp32)", str(batch), f"{f_it.median:.1f}", f"{f_up.median:.1f}",
                     f"{f_it.median / base.median:.2f}"))  # fmt: skip
        model.env.close()
    print(f"\ndqn on {device}: Breakout, 1 env, one update per env step, prioritized replay "
          f"(median of {repeats} x {iters}; ratio = it/s / rlamd {precisions[0]}'s)")  # fmt: skip
    print_table(rows, ("framework", "batch", "iterations/s", "learner updates/s", "ratio"))
    for f in figures:
        if "ratio_to_sb3" in f.meta:
            print(
                f"rlamd {f.meta['precision']} at batch {f.meta['batch']}: {f.meta['ratio_to_sb3']:.2f}x SB3's iterations/s"
            )
    return figures
