"""TD3 learner updates/s at HalfCheetah-v5's sizes (obs 17, actions 6, batch 256, [400, 300]):
rlamd per precision, its actor step on Q1 alone (now) and on both twin members (before,
emulated by patching ``TwinQ.forward``), beside SB3 2.9.2's TD3 ``train()``; 100 updates a
round, rounds interleaved, one torch thread. Needs ``bash scripts/setup.sh --bench --mujoco``.

    taskset -c 0 .venv/bin/python results/td3_q1_learner/timing.py [ROUNDS]
"""

import statistics
import sys
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import TD3 as SB3TD3
from stable_baselines3.common.logger import Logger

from rlamd.agents import networks
from rlamd.agents.td3 import TD3, TD3Config
from rlamd.precision import Precision
from rlamd.replay import ReplayBuffer

torch.set_num_threads(1)
CPU, RNG = torch.device("cpu"), np.random.default_rng(0)
BUF = ReplayBuffer(100_000, 1, (17,), torch.float32, action_shape=(6,), seed=0)
for _ in range(20_000):
    obs = RNG.normal(size=(1, 17)).astype(np.float32)
    BUF.add(
        obs, RNG.uniform(-1, 1, (1, 6)), RNG.normal(size=1), np.zeros(1, bool), np.zeros(1, bool)
    )
NOW = networks.TwinQ.forward


def both_members(self, obs, actions, member=None):
    q = NOW(self, obs, actions)
    return q if member is None else q[member]


def rlamd(precision: str, before: bool = False):
    agent = TD3(TD3Config(), (17,), 6, CPU, Precision(precision, CPU), seed=0)

    def run(n: int) -> None:
        networks.TwinQ.forward = both_members if before else NOW
        try:
            for _ in range(n):
                agent.learn(BUF, 256)
        finally:
            networks.TwinQ.forward = NOW

    return run


def sb3():
    model = SB3TD3(
        "MlpPolicy",
        gym.make("HalfCheetah-v5"),
        learning_starts=0,
        batch_size=256,
        learning_rate=1e-3,
        policy_kwargs={"net_arch": [400, 300]},
        seed=0,
        device="cpu",
    )
    model.set_logger(Logger(folder=None, output_formats=[]))
    for _ in range(20_000):
        obs = RNG.normal(size=(1, 17)).astype(np.float32)
        model.replay_buffer.add(
            obs, obs, RNG.uniform(-1, 1, (1, 6)), RNG.normal(size=1), np.zeros(1), [{}]
        )
    return lambda n: model.train(gradient_steps=n, batch_size=256)


def main(rounds: int) -> None:
    runs = {
        "rlamd fp32 (Q1 alone)": rlamd("fp32"),
        "rlamd fp32 (both, before)": rlamd("fp32", before=True),
        "rlamd bf16 (Q1 alone)": rlamd("bf16"),
        "rlamd bf16 (both, before)": rlamd("bf16", before=True),
        "SB3 fp32": sb3(),
    }
    for run in runs.values():
        run(20)  # warm-up
    rates = {k: [] for k in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            t0 = time.perf_counter()
            run(100)
            rates[name].append(100 / (time.perf_counter() - t0))
    for name, values in rates.items():
        r = [a / b for a, b in zip(values, rates["SB3 fp32"], strict=True)]
        ratio = f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})"
        print(f"{name:28s} {statistics.median(values):7.1f} updates/s   x SB3 {ratio}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
