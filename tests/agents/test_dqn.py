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


def _filled(kind, seed=0):
    import numpy as np

    from rlamd.replay import PrioritizedReplayBuffer

    buf = kind(
        256,
        4,
        (3,),
        torch.float32,
        num_actions=4,
        n_step=3,
        seed=seed,
        **({"backend": "torch"} if kind is PrioritizedReplayBuffer else {}),
    )
    rng = np.random.default_rng(seed)
    z = np.zeros(4, dtype=bool)
    for t in range(40):
        obs = rng.normal(size=(4, 3)).astype(np.float32)
        done = (np.arange(4) + t) % 7 == 0
        buf.add(obs, rng.integers(0, 4, 4), rng.normal(size=4).astype(np.float32), z, done, obs + 1)
    return buf


@pytest.mark.parametrize("prioritized", [True, False])
@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_graph_ready_learn_step_equals_sample_update_priorities(prioritized, tau):
    """agent.learn (the step a GPU captures, run eagerly here) == today's three calls."""
    from rlamd.replay import PrioritizedReplayBuffer, ReplayBuffer

    kind = PrioritizedReplayBuffer if prioritized else ReplayBuffer
    new, old = _agent(target_update_interval=3, tau=tau), _agent(target_update_interval=3, tau=tau)
    new_buf, old_buf = _filled(kind), _filled(kind)
    for i in range(10):  # hard syncs after updates 3, 6, 9
        beta = 0.4 + 0.05 * i
        td_new = new.learn(new_buf, 16, beta)
        kw = {"beta": beta} if prioritized else {}
        batch = old_buf.sample(16, **kw)
        td_old = old.update(batch)
        if prioritized:
            old_buf.update_priorities(batch.indices, td_old)
        assert torch.equal(td_new, td_old)
    assert new.updates == old.updates == 10 and int(new._updates_t) == 10
    for a, b in zip(
        [*new.q.parameters(), *new.target.parameters()],
        [*old.q.parameters(), *old.target.parameters()],
        strict=True,
    ):
        assert torch.equal(a, b)
    if prioritized:
        assert torch.equal(new_buf.sampler.tree.leaves, old_buf.sampler.tree.leaves)
    assert new.read_metrics() == old.read_metrics()
    if tau == 1.0:  # the blend is an exact copy on sync updates and a no-op between them
        new.learn(new_buf, 16)
        assert not all(
            torch.equal(a, b)
            for a, b in zip(new.q.parameters(), new.target.parameters(), strict=True)
        )


def test_target_blend_is_a_copy_exactly_on_due_updates():
    agent = _agent(target_update_interval=2)
    with torch.no_grad():
        for p in agent.q.parameters():
            p.add_(1.0)
    before = [p.clone() for p in agent.target.parameters()]
    agent._updates_t.fill_(3)
    agent._blend_target()
    assert all(torch.equal(t, b) for t, b in zip(agent.target.parameters(), before, strict=True))
    agent._updates_t.fill_(4)
    agent._blend_target()
    assert all(
        torch.equal(t, q)
        for t, q in zip(agent.target.parameters(), agent.q.parameters(), strict=True)
    )


def test_act_takes_a_device_epsilon_tensor_like_a_float():
    a, b = _agent(), _agent()
    obs = torch.randn(256, 3)
    assert torch.equal(a._act_body(obs, 0.3), b._act_body(obs, torch.tensor(0.3)))


def test_graph_on_is_refused_on_the_cpu():
    with pytest.raises(ValueError, match="graph='on' needs a CUDA or ROCm GPU"):
        DQN(DQNConfig(hidden=(8,)), (3,), 2, CPU, Precision("fp32", CPU), graph="on")


def test_load_state_dict_restores_the_device_update_counter():
    a, b = _agent(), _agent()
    for _ in range(3):
        a.update(_batch())
    b.load_state_dict(a.state_dict())
    assert int(b._updates_t) == 3 and b.updates == 3
