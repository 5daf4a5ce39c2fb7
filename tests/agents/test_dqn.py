"""DQN's update against the Double-Q formula, and batched epsilon-greedy acting."""

from __future__ import annotations

import pytest
import torch

from rlamd.agents.dqn import DQN, DQNConfig
from rlamd.precision import Precision
from rlamd.replay import ReplayBatch

CPU = torch.device("cpu")


def _agent(**kw):
    torch.manual_seed(0)
    cfg = DQNConfig(hidden=(16,), **kw)
    return DQN(
        cfg, (3,), 4, CPU, Precision("fp32", CPU, max_grad_norm=None, grad_clamp=None), seed=0
    )


def _batch(n=8):
    g = torch.Generator().manual_seed(1)
    return ReplayBatch(
        obs=torch.randn(n, 3, generator=g),
        actions=torch.randint(0, 4, (n,), generator=g),
        returns=torch.randn(n, generator=g),
        next_obs=torch.randn(n, 3, generator=g),
        discounts=torch.tensor([0.9, 0.0] * (n // 2)),
        weights=torch.rand(n, generator=g),
        indices=torch.arange(n),
    )


def test_td_errors_follow_double_q_formula():
    agent = _agent(double_q=True)
    with torch.no_grad():  # make target differ from online
        g = torch.Generator().manual_seed(7)
        for p in agent.target.parameters():
            p.add_(torch.randn(p.shape, generator=g))
    b = _batch()
    with torch.no_grad():
        q = agent.q(b.obs).gather(1, b.actions[:, None]).squeeze(1)
        a_star = agent.q(b.next_obs).argmax(1)
        y = b.returns + b.discounts * agent.target(b.next_obs).gather(1, a_star[:, None]).squeeze(1)
        plain_y = b.returns + b.discounts * agent.target(b.next_obs).max(1).values
        # the precondition that makes the last assertion meaningful
        assert (a_star != agent.target(b.next_obs).argmax(1))[b.discounts > 0].any()
    td = agent.update(b)
    torch.testing.assert_close(td, (q - y).abs())
    assert not torch.allclose(td, (q - plain_y).abs())  # Double-Q differs from max-Q here


def test_target_sync_hard_and_polyak():
    hard = _agent(target_update_interval=2)
    hard.update(_batch())
    assert not all(
        torch.equal(a, b)
        for a, b in zip(hard.q.parameters(), hard.target.parameters(), strict=True)
    )
    hard.update(_batch())
    assert all(
        torch.equal(a, b)
        for a, b in zip(hard.q.parameters(), hard.target.parameters(), strict=True)
    )
    soft = _agent(tau=0.5)
    before = [p.clone() for p in soft.target.parameters()]
    soft.update(_batch())
    for t, b, q in zip(soft.target.parameters(), before, soft.q.parameters(), strict=True):
        torch.testing.assert_close(t, 0.5 * b + 0.5 * q)


def test_act_is_batched_epsilon_greedy():
    agent = _agent()
    obs = torch.randn(1000, 3)
    greedy = agent.q(obs).argmax(1)
    assert torch.equal(agent.act(obs, 0.0), greedy)
    random = agent.act(obs, 1.0)
    assert (random != greedy).float().mean() > 0.5  # about 3/4 differ under uniform actions
    assert set(random.tolist()) == {0, 1, 2, 3}


def test_schedules():
    cfg = DQNConfig(
        eps_start=1.0, eps_end=0.1, exploration_fraction=0.5, beta_start=0.4, beta_end=1.0
    )
    assert [cfg.epsilon(s, 100) for s in (0, 25, 90)] == pytest.approx([1.0, 0.55, 0.1])
    assert [cfg.beta(s, 100) for s in (50, 200)] == pytest.approx([0.7, 1.0])


def test_state_dict_round_trip_continues_identically():
    a, b = _agent(), _agent(lr=0.5)
    a.update(_batch())
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.update(_batch()), b.update(_batch()))
    obs = torch.randn(64, 3)
    assert torch.equal(a.act(obs, 0.5), b.act(obs, 0.5))  # same exploration generator state
