"""DQN's update against the Double-Q formula, its one learn step, and batched epsilon-greedy acting."""

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
    td = agent.update_on(b)
    torch.testing.assert_close(td, (q - y).abs())
    assert not torch.allclose(td, (q - plain_y).abs())  # Double-Q differs from max-Q here


def test_target_sync_hard_and_polyak():
    hard = _agent(target_update_interval=2)
    buf = _filled(_uniform())
    hard.learn(buf, 8)
    assert not all(
        torch.equal(a, b)
        for a, b in zip(hard.q.parameters(), hard.target.parameters(), strict=True)
    )
    hard.learn(buf, 8)
    assert all(
        torch.equal(a, b)
        for a, b in zip(hard.q.parameters(), hard.target.parameters(), strict=True)
    )
    soft = _agent(tau=0.5)
    before = [p.clone() for p in soft.target.parameters()]
    soft.learn(buf, 8)
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
    a, b = _agent(), _agent()  # b has not stepped: its moments and step count come from a
    a.update_on(_batch())
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.update_on(_batch()), b.update_on(_batch()))
    obs = torch.randn(64, 3)
    assert torch.equal(a.act(obs, 0.5), b.act(obs, 0.5))  # same exploration generator state


def _uniform():
    from rlamd.replay import ReplayBuffer

    return ReplayBuffer


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
@pytest.mark.parametrize("captured", [False, True])
def test_the_one_learn_step_equals_the_former_cpu_path(prioritized, tau, captured):
    """Nothing lost in making one learn path: ``agent.learn`` (through the capture wrapper,
    with static input buffers as a GPU replays them, or eager as the CPU runs it) gives
    exactly the parameters, priorities and metrics of the former CPU path, written out
    here: sample with a float beta, update, target copy by the host counter (a state-dict
    load), priorities."""
    from rlamd.algos.dqn import capture_dqn
    from rlamd.replay import PrioritizedReplayBuffer, ReplayBuffer

    kind = PrioritizedReplayBuffer if prioritized else ReplayBuffer
    new = capture_dqn(_agent(target_update_interval=3, tau=tau), "auto")
    if captured:  # the static-buffer path a GPU captures, run eagerly on the CPU
        new.learn_step.capture = new.act.capture = True
    old = _agent(target_update_interval=3, tau=tau)
    new_buf, old_buf = _filled(kind), _filled(kind)
    for i in range(10):  # hard syncs after updates 3, 6, 9
        beta = 0.4 + 0.05 * i
        td_new = new.learn(new_buf, 16, beta).clone()
        batch = old_buf.sample(16, beta)
        td_old = old.update_on(batch)
        old.updates += 1
        with torch.no_grad():
            if tau < 1.0:
                for t, q in zip(old.target.parameters(), old.q.parameters(), strict=True):
                    t.lerp_(q, tau)
            elif old.updates % 3 == 0:
                old.target.load_state_dict(old.q.state_dict())
        if prioritized:
            old_buf.update_priorities(batch.indices, td_old)
        assert torch.equal(td_new, td_old)
    assert new.updates == old.updates == 10
    assert new.learn_step.captured is False  # no GPU: the graph itself never runs here
    for a, b in zip(
        [*new.q.parameters(), *new.target.parameters()],
        [*old.q.parameters(), *old.target.parameters()],
        strict=True,
    ):
        assert torch.equal(a, b)
    if prioritized:
        assert torch.equal(new_buf.sampler.tree.leaves, old_buf.sampler.tree.leaves)
    assert new.read_metrics() == old.read_metrics()
    obs = torch.randn(64, 3)
    assert torch.equal(new.act(obs, 0.3), old.act(obs, 0.3))


def test_act_takes_a_device_epsilon_tensor_like_a_float():
    a, b = _agent(), _agent()
    obs = torch.randn(256, 3)
    assert torch.equal(a.act(obs, 0.3), b.act(obs, torch.tensor(0.3, dtype=torch.float64)))


def test_graph_on_is_refused_on_the_cpu():
    from rlamd.algos.dqn import capture_dqn

    with pytest.raises(ValueError, match="graph='on' needs a CUDA or ROCm GPU"):
        capture_dqn(DQN(DQNConfig(hidden=(8,)), (3,), 2, CPU, Precision("fp32", CPU)), "on")


def test_load_state_dict_restores_the_counter_and_keeps_the_optimizer_tensors():
    """Loading in place keeps the tensors a captured step reads (Adam's moments)."""
    a, b = _agent(), _agent()
    for _ in range(3):
        a.learn(_filled(_uniform()), 8)
    b.update_on(_batch())  # b's moments exist, as after a captured step
    moments = [b.optimizer.state[p]["exp_avg"] for p in b.params]
    b.load_state_dict(a.state_dict())
    assert b.updates == 3
    for p, m, pa in zip(b.params, moments, a.params, strict=True):
        assert b.optimizer.state[p]["exp_avg"] is m
        assert torch.equal(m, a.optimizer.state[pa]["exp_avg"])
