"""TD3: bounded noisy actions, the delayed actor and target updates, the smoothed target,
the checkpoint round trip and same-seed determinism (on the CPU)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from rlamd.agents.td3 import TD3, TD3Config
from rlamd.precision import Precision
from rlamd.replay import ReplayBuffer

CPU = torch.device("cpu")
LOW, HIGH = torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 1.0])


def _replay(seed: int = 0) -> ReplayBuffer:
    buf = ReplayBuffer(1000, 2, (3,), torch.float32, action_shape=(2,), seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(150):
        buf.add(
            rng.normal(size=(2, 3)).astype(np.float32),
            rng.uniform(-1, 1, size=(2, 2)),
            rng.normal(size=2),
            np.zeros(2, bool),
            np.zeros(2, bool),
        )
    return buf


def _agent(seed: int = 0, **settings) -> TD3:
    cfg = TD3Config(hidden=(32, 32), **settings)
    prec = Precision("fp32", CPU, max_grad_norm=None, grad_clamp=None)
    torch.manual_seed(seed)
    return TD3(cfg, (3,), 2, CPU, prec, seed=seed, low=LOW, high=HIGH)


def test_noisy_actions_stay_in_the_box_around_the_mean_action():
    agent = _agent(exploration_noise=0.1)
    obs = torch.randn(3000, 3)
    mu, act = agent.act_mean(obs), agent.act(obs, 0.0)
    assert act.shape == (3000, 2) and bool((act >= LOW).all() and (act <= HIGH).all())
    # noise std 0.1 half-widths: 0.2 and 0.05 here (less where the clip bites)
    spread = (act - mu).std(0)
    assert bool((spread <= torch.tensor([0.2, 0.05]) * 1.05).all()) and bool((spread > 0).all())
    assert torch.equal(agent.act_mean(obs), mu)


def test_the_actor_and_targets_move_only_every_policy_frequency_updates():
    agent, buf = _agent(policy_frequency=2, tau=0.5), _replay()
    a0 = [p.detach().clone() for p in agent.actor_params]
    t0 = [p.detach().clone() for p in agent.critic.target_params]
    q0 = [p.detach().clone() for p in agent.critic.params]
    agent.learn(buf, 32)  # update 1 of 2: critics only
    assert all(torch.equal(a, b) for a, b in zip(a0, agent.actor_params, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(t0, agent.critic.target_params, strict=True))
    assert all(not torch.equal(a, b) for a, b in zip(q0, agent.critic.params, strict=True))
    agent.learn(buf, 32)  # update 2: actor, then both targets blend by tau
    assert any(not torch.equal(a, b) for a, b in zip(a0, agent.actor_params, strict=True))
    for before, now, target in zip(
        t0, agent.critic.params, agent.critic.target_params, strict=True
    ):
        assert torch.allclose(target, 0.5 * before + 0.5 * now, atol=1e-6)
    for before, now, target in zip(a0, agent.actor_params, agent._actor_target_params, strict=True):
        assert torch.allclose(target, 0.5 * before + 0.5 * now, atol=1e-6)


def test_the_critic_target_without_smoothing_noise_is_the_clipped_double_q():
    """policy_noise 0: y = G + g * min_i Q_bar_i(s', mu_bar(s')), by hand from the targets."""
    agent, buf = _agent(policy_noise=0.0), _replay()
    batch = buf.sample(16)
    with torch.no_grad():
        nxt = agent.actor_target(batch.next_obs)
        y = batch.returns + batch.discounts * agent.critic.target(batch.next_obs, nxt).amin(0)
        q = agent.critic.q(batch.obs, batch.actions)
    td = agent.update_on(batch, update_actor=False)
    assert torch.allclose(td, (q - y).abs().mean(0), atol=1e-5)


def test_checkpoint_round_trip_and_same_seed_determinism():
    a, buf_a = _agent(seed=1), _replay(seed=2)
    for _ in range(3):
        a.learn(buf_a, 32)
    b, buf_b = _agent(seed=7), _replay(seed=2)
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    buf_b.load_state_dict(buf_a.state_dict())
    for _ in range(3):
        a.learn(buf_a, 32)
        b.learn(buf_b, 32)
    pairs = zip(a.actor_params + a.critic.params, b.actor_params + b.critic.params, strict=True)
    assert all(torch.equal(p, q) for p, q in pairs)
    c, buf_c = _agent(seed=1), _replay(seed=2)
    for _ in range(6):
        c.learn(buf_c, 32)
    assert all(torch.equal(p, q) for p, q in zip(a.actor_params, c.actor_params, strict=True))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_q1_alone_matches_the_whole_twin_in_values_and_action_gradients(precision):
    """TD3's actor loss asks the twin for Q_1 only (``member=0``, half the critic's cost):
    the same values and the same gradient into the actions as Q_1 of both members, in fp32
    and under bf16 autocast."""
    from rlamd.agents.networks import TwinQ

    torch.manual_seed(0)
    twin, autocast = TwinQ(3, 2, (16, 8)), Precision(precision, CPU).autocast
    obs = torch.randn(32, 3)
    a_one, a_both = (torch.randn(32, 2).requires_grad_() for _ in range(2))
    with torch.no_grad():
        a_both.copy_(a_one)
    with autocast():
        one, both = twin(obs, a_one, member=0), twin(obs, a_both)
        other = twin(obs, a_one, member=1)
    assert one.shape == (32,) and both.shape == (2, 32) and one.dtype == torch.float32
    torch.testing.assert_close(one, both[0])
    torch.testing.assert_close(other, both[1])
    one.sum().backward()
    both[0].sum().backward()
    torch.testing.assert_close(a_one.grad, a_both.grad)
    for bad in (-1, 2):
        with pytest.raises(ValueError, match=f"member={bad}; accepted: 0 to 1 or None"):
            twin(obs, a_one, member=bad)


def test_the_actor_step_asks_for_q1_alone():
    agent = _agent()
    asked, forward = [], type(agent.critic.q).forward

    def spy(self, obs, actions, member=None):
        asked.append(member)
        return forward(self, obs, actions, member)

    type(agent.critic.q).forward = spy
    try:
        agent.update_on(_replay().sample(16), update_actor=True)
    finally:
        type(agent.critic.q).forward = forward
    assert asked == [None, None, 0]  # the target and the critics' step on both; the actor Q_1
