"""Stepping the envs while the learner works (ale-py send/recv)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlamd.algos import build_agent, get_algorithm
from rlamd.collector import Collector
from rlamd.config.sections import RunConfig
from rlamd.envs import make_env


def test_send_then_recv_is_the_same_step_as_step():
    a, b = make_env("breakout", num_envs=2), make_env("breakout", num_envs=2)
    assert a.can_overlap  # ale-py's C++ vector env
    a.reset(seed=3)
    b.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(40):
        actions = rng.integers(0, a.num_actions, size=2)
        one = a.step(actions)
        b.send(actions)
        two = b.recv()
        for x, y in zip(one, two, strict=True):
            np.testing.assert_array_equal(x, y)
    a.close()
    b.close()


def _loop(overlap: bool):
    cfg = RunConfig.from_dict(
        {
            "train": {
                "env": "breakout",
                "num_envs": 2,
                "device": "cpu",
                "steps": 100_000,
                "seed": 4,
            },
            "dqn": {
                "buffer_size": 2_000,
                "batch_size": 8,
                "learning_starts": 40,
                "train_frequency": 1,
                "eps_start": 1.0,
                "eps_end": 1.0,
            },
        }
    )
    env = make_env("breakout", num_envs=2)
    torch.manual_seed(0)
    agent = build_agent(cfg, torch.device("cpu"), env)
    loop = get_algorithm("dqn").local_loop(
        cfg, Collector(env, torch.device("cpu"), 0), agent, 0, print
    )
    loop.overlap = overlap
    return loop, agent


@pytest.mark.slow  # about 137 s on the loaded 2-core machine
def test_learning_while_the_envs_step_stores_the_same_transitions():
    """Epsilon 1: actions do not depend on the weights, so both orders see the same games;
    the overlapped loop makes its updates between send and recv, on the replay as it was."""
    plain, a1 = _loop(overlap=False)
    over, a2 = _loop(overlap=True)
    for _ in range(60):
        plain.iterate()
        over.iterate()
    assert a1.updates > 0 and abs(a1.updates - a2.updates) <= 2
    s1, s2 = plain.buffer.storage, over.buffer.storage
    assert torch.equal(s1.frames, s2.frames) and torch.equal(s1.rewards, s2.rewards)
    plain.collector.close()
    over.collector.close()
