"""On a GPU, a whole DQN learn step (sample, update, priorities) and a whole PPO update
run without one host synchronisation (docs/ARCHITECTURE.md, rule 2)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU"),
]


def _sync_free(fn):
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_dqn_learn_step_is_sync_free(precision):
    from rlamd.agents.dqn import DQN, DQNConfig
    from rlamd.precision import Precision
    from rlamd.replay import PrioritizedReplayBuffer

    dev = torch.device("cuda", 0)
    agent = DQN(DQNConfig(batch_size=128), (4, 84, 84), 4, dev, Precision(precision, dev))
    buf = PrioritizedReplayBuffer(
        8 * 256, 8, (4, 84, 84), torch.uint8, frame_stack=4, num_actions=4, n_step=3, device=dev
    )
    rng = np.random.default_rng(0)
    z = np.zeros(8, dtype=bool)
    for _ in range(100):
        buf.add(rng.integers(0, 255, (8, 4, 84, 84), dtype=np.uint8), np.zeros(8), np.ones(8), z, z)

    def learn():
        for _ in range(5):
            agent.learn(buf, 128, 0.5)

    _sync_free(learn)
    assert agent.updates == 5


def test_ppo_update_is_sync_free():
    from rlamd.agents.ppo import PPO, PPOConfig, Rollout
    from rlamd.precision import Precision

    dev = torch.device("cuda", 0)
    agent = PPO(PPOConfig(num_steps=32), (4, 84, 84), 4, dev, Precision("bf16", dev))
    ro = Rollout(32, 8, (4, 84, 84), torch.uint8, dev)
    ro.obs.random_(0, 255)
    ro.rewards.normal_()
    _sync_free(lambda: agent.update(ro, torch.zeros(8, device=dev)))
    assert agent.updates == 16
