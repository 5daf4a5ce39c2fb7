"""A replay filled with synthetic Atari-shaped transitions, for measurements and tests that
need a buffer in a known state without playing a game (the bench's learner and replay
suites, ``scripts/gpu_checks.sh``, the sync-free and graph tests)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .buffer import PrioritizedReplayBuffer, ReplayBuffer

__all__ = ["ATARI", "filled_replay"]

ATARI = ((4, 84, 84), 4)
"""An Atari observation's shape (4 stacked 84x84 frames) and Breakout's action count."""


def filled_replay(
    device: torch.device,
    capacity: int = 8 * 1024,
    seed: int = 0,
    *,
    prioritized: bool = True,
    steps: int = 512,
    **options: Any,
) -> ReplayBuffer | PrioritizedReplayBuffer:
    """An Atari-shaped replay (8 envs, uint8 4x84x84, 3-step) after ``steps`` vector steps of
    random frames, actions and rewards (an episode ends every 97 steps per env), prioritized
    (alpha 0.5) or uniform; ``options`` go to the buffer (``backend``, ``validate`` ...)."""
    kind, options = ReplayBuffer, {"frame_stack": 4, "num_actions": 4, "n_step": 3, **options}
    if prioritized:
        kind, options = PrioritizedReplayBuffer, {"alpha": 0.5, **options}
    buf = kind(capacity, 8, ATARI[0], torch.uint8, device=device, seed=seed, **options)
    rng = np.random.default_rng(seed)
    z = np.zeros(8, dtype=bool)
    frames = rng.integers(0, 255, (16, 8, 4, 84, 84), dtype=np.uint8)
    for t in range(steps):
        done, obs = (np.arange(8) + t) % 97 == 0, frames[t % 16]
        buf.add(obs, rng.integers(0, 4, 8), rng.normal(size=8).astype(np.float32), z, done, obs)
    return buf
