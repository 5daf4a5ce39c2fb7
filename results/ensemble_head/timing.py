"""SAC and TD3 learner updates/s at HalfCheetah-v5's sizes (obs 17, actions 6, batch 256):
rlamd per precision with the twin critics' output layer as a product and a sum (now) and as
a batched matrix product (before, emulated by patching ``networks._ensemble_out``), beside
SB3 2.9.2's ``train()`` with the RL Zoo's MuJoCo settings; 100 updates a round, rounds
interleaved, one torch thread. Needs ``bash scripts/setup.sh --bench --mujoco``.

    taskset -c 0 .venv/bin/python results/ensemble_head/timing.py [ROUNDS]
"""

import statistics
import sys
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import SAC as SB3SAC
from stable_baselines3 import TD3 as SB3TD3
from stable_baselines3.common.logger import Logger

from rlamd.agents import networks
from rlamd.agents.sac import SAC, SACConfig
from rlamd.agents.td3 import TD3, TD3Config
from rlamd.precision import Precision
from rlamd.replay import ReplayBuffer

torch.set_num_threads(1)
CPU, RNG = torch.device("cpu"), np.random.default_rng(0)
ROWS = [
    (RNG.normal(size=(1, 17)).astype(np.float32), RNG.uniform(-1, 1, (1, 6)), RNG.normal(size=1))
    for _ in range(20_000)
]
BUF = ReplayBuffer(100_000, 1, (17,), torch.float32, action_shape=(6,), seed=0)
for obs, act, rew in ROWS:
    BUF.add(obs, act, rew, np.zeros(1, bool), np.zeros(1, bool))
NOW = networks._ensemble_out


def batched(x, w, b):
    return torch.baddbmm(b, x, w)


def rlamd(kind, cfg, precision: str, before: bool = False):
    agent = kind(cfg, (17,), 6, CPU, Precision(precision, CPU, max_grad_norm=None, grad_clamp=None))

    def run(n: int) -> None:
        networks._ensemble_out = batched if before else NOW
        try:
            for _ in range(n):
                agent.learn(BUF, 256)
        finally:
            networks._ensemble_out = NOW

    return run


def sb3(kind, **kwargs):
    model = kind(
        "MlpPolicy", gym.make("HalfCheetah-v5"), learning_starts=0, seed=0, device="cpu", **kwargs
    )
    model.set_logger(Logger(folder=None, output_formats=[]))
    for obs, act, rew in ROWS:
        model.replay_buffer.add(obs, obs, act, rew, np.zeros(1), [{}])
    return lambda n: model.train(gradient_steps=n, batch_size=model.batch_size)


def main(rounds: int) -> None:
    td3 = {"learning_rate": 1e-3, "batch_size": 256, "policy_kwargs": {"net_arch": [400, 300]}}
    runs = {}
    for name, kind, cfg in (("SAC", SAC, SACConfig()), ("TD3", TD3, TD3Config())):
        for p in ("fp32", "bf16"):
            runs[f"rlamd {name} {p} (product + sum)"] = rlamd(kind, cfg, p)
            runs[f"rlamd {name} {p} (batched, before)"] = rlamd(kind, cfg, p, before=True)
        runs[f"SB3 {name} fp32"] = (
            sb3(SB3SAC, batch_size=256) if name == "SAC" else sb3(SB3TD3, **td3)
        )
    for run in runs.values():  # warm-up
        run(10)
    rates: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for k, run in runs.items():
            t = time.perf_counter()
            run(100)
            rates[k].append(100 / (time.perf_counter() - t))
    print(f"updates/s, median of {rounds} interleaved rounds of 100 (ratio: per round, median)")
    for k, r in rates.items():
        base = rates[f"SB3 {k.split()[1]} fp32"]
        ratio = statistics.median(a / b for a, b in zip(r, base, strict=True))
        print(f"{k:38s} {statistics.median(r):7.1f}   {ratio:.2f}x SB3")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
