"""Learner throughput without envs: DQN updates/s at several batch sizes, PPO minibatch
updates/s, per precision, on synthetic Atari batches already on the device."""

from __future__ import annotations

import torch

from .common import Figure, measure, print_table

__all__ = ["run_learner_suite"]


def _precisions(device: torch.device, native_bf16: bool) -> list[str]:
    if device.type == "cuda":
        return ["fp32", "bf16", "fp16"] if native_bf16 else ["fp32", "fp16"]
    return ["fp32", "bf16"]


def run_learner_suite(
    device: torch.device | str = "cpu",
    batches: tuple[int, ...] = (32, 128, 512),
    iters: int = 10,
    repeats: int = 3,
    ppo: bool = True,
) -> list[Figure]:
    from rlamd.agents.dqn import DQN, DQNConfig
    from rlamd.agents.ppo import PPO, PPOConfig
    from rlamd.device import describe_device
    from rlamd.precision import Precision
    from rlamd.replay import ReplayBatch

    device = torch.device(device)
    info = describe_device(device)
    g = torch.Generator(device=device).manual_seed(0)
    figures: list[Figure] = []
    rows = []
    mb = 256  # PPO minibatch: 8 envs x 128 steps / 4
    for precision in _precisions(device, info.bf16):
        for batch in batches:
            agent = DQN(DQNConfig(), (4, 84, 84), 4, device, Precision(precision, device))
            b = ReplayBatch(
                torch.randint(0, 255, (batch, 4, 84, 84), dtype=torch.uint8, device=device, generator=g),
                torch.randint(0, 4, (batch,), device=device, generator=g),
                torch.randn(batch, device=device, generator=g),
                torch.randint(0, 255, (batch, 4, 84, 84), dtype=torch.uint8, device=device, generator=g),
                torch.full((batch,), 0.97, device=device), torch.ones(batch, device=device),
                torch.arange(batch, device=device),
            )  # fmt: skip

            def run(agent=agent, b=b) -> int:
                for _ in range(iters):
                    agent.update(b)
                return iters

            f = measure(f"learner/dqn/{precision}/b{batch}", "updates/s", run, repeats=repeats, device=device,
                        precision=precision, batch=batch)  # fmt: skip
            figures.append(f)
            rows.append(("DQN update", precision, str(batch), f"{f.median:,.1f}"))
        if ppo:
            cfg = PPOConfig(num_steps=32, num_minibatches=1, update_epochs=1)
            agent = PPO(cfg, (4, 84, 84), 4, device, Precision(precision, device))
            obs = torch.randint(
                0, 255, (mb, 4, 84, 84), dtype=torch.uint8, device=device, generator=g
            )
            actions = torch.randint(0, 4, (mb,), device=device, generator=g)
            zeros = torch.zeros(mb, device=device)

            def run_ppo(agent=agent, obs=obs, actions=actions, zeros=zeros) -> int:
                for _ in range(iters):
                    agent._minibatch(
                        obs,
                        actions,
                        zeros,
                        zeros,
                        torch.randn(mb, device=device, generator=g),
                        zeros,
                    )
                return iters

            f = measure(f"learner/ppo/{precision}/mb{mb}", "updates/s", run_ppo, repeats=repeats, device=device,
                        precision=precision, batch=mb)  # fmt: skip
            figures.append(f)
            rows.append(("PPO minibatch", precision, str(mb), f"{f.median:,.1f}"))
    print(
        f"\nlearner on {device}: Nature CNN, synthetic Atari batches on the device (median of {repeats} x {iters})"
    )
    print_table(rows, ("update", "precision", "batch", "updates/s"))
    return figures
