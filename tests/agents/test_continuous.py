"""PPO with continuous actions, and the normalisers: the Gaussian's log-probabilities and
entropy against torch.distributions, sampling, an update that follows the advantage, the
running statistics against whole-batch moments, and state round trips."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlamd.agents.distributions import DiagGaussian
from rlamd.agents.normalize import ReturnScaler, RunningNorm
from rlamd.agents.ppo import PPO, PPOConfig, PPORows, Rollout
from rlamd.precision import Precision

CPU = torch.device("cpu")


def _agent(**kw) -> PPO:
    torch.manual_seed(0)
    cfg = PPOConfig(**{"log_std_init": -0.5, **kw})
    return PPO(cfg, (3,), 2, CPU, Precision("fp32", CPU), seed=0, continuous=True)


def test_gaussian_log_prob_and_entropy_match_torch_distributions():
    g = torch.Generator().manual_seed(1)
    mean, log_std = torch.randn(50, 3, generator=g), torch.randn(3, generator=g) * 0.3
    actions = torch.randn(50, 3, generator=g)
    ref = torch.distributions.Normal(mean, log_std.exp())
    lp, ent = DiagGaussian(log_std).log_prob_entropy(mean, actions)
    torch.testing.assert_close(lp, ref.log_prob(actions).sum(1))
    torch.testing.assert_close(ent, ref.entropy().sum(1).mean())


def test_act_samples_the_gaussian_and_greedy_takes_its_mean():
    agent = _agent()
    obs = torch.randn(1, 3).expand(20_000, 3)
    a, lp, _ = agent.act(obs)
    mean, _ = agent.net(obs[:1])
    std = agent.net.log_std.exp()
    assert a.shape == (20_000, 2) and a.dtype == torch.float32
    torch.testing.assert_close(a.mean(0), mean[0], atol=0.02, rtol=0)
    torch.testing.assert_close(a.std(0), std.detach(), atol=0.02, rtol=0)
    torch.testing.assert_close(lp, agent.logprob(obs, a))
    greedy, glp, _ = agent.act(obs[:4], greedy=True)
    torch.testing.assert_close(greedy, mean.expand(4, 2))
    assert torch.allclose(glp, (-agent.net.log_std - 0.5 * math.log(2 * math.pi)).sum())


def test_update_moves_the_mean_towards_advantaged_actions():
    agent = _agent(num_minibatches=2, update_epochs=4, lr=1e-2)
    T, N = 16, 4
    ro = Rollout(T, N, (3,), torch.float32, CPU, action_size=2)
    ro.obs.copy_(torch.randn(T, N, 3, generator=torch.Generator().manual_seed(2)))
    a, lp, v = agent.act(ro.obs.reshape(-1, 3))
    ro.actions.copy_(a.view(T, N, 2))
    ro.logprobs.copy_(lp.view(T, N))
    ro.values.copy_(v.view(T, N))
    ro.rewards.copy_(ro.actions[..., 0])  # the larger the first dimension, the better
    before = agent.net(ro.obs.reshape(-1, 3))[0][:, 0].mean()
    agent.update(ro, torch.zeros(N))
    after = agent.net(ro.obs.reshape(-1, 3))[0][:, 0].mean()
    assert after > before + 0.01
    m = agent.read_metrics()
    assert m["losses/entropy"] == pytest.approx(
        float((0.5 + 0.5 * math.log(2 * math.pi) + agent.net.log_std.detach()).sum()), abs=0.1
    )


def test_rows_carry_continuous_actions():
    agent = _agent()
    ro = Rollout(8, 2, (3,), torch.float32, CPU, action_size=2)
    ro.actions.normal_()
    rows = agent.flatten(ro, torch.zeros(2))
    assert rows.actions.shape == (16, 2)
    both = PPORows.cat([rows, rows], CPU)
    assert both.actions.shape == (32, 2) and both.obs.shape == (32, 3)


def test_running_norm_merges_to_the_moments_of_everything_seen():
    g = torch.Generator().manual_seed(4)
    norm = RunningNorm((3,), clip=5.0)
    batches = [torch.randn(n, 3, generator=g) * 3 + 7 for n in (10, 1, 37)]
    for b in batches:
        norm.update(*RunningNorm.moments(b), b.shape[0])
    whole = torch.cat(batches).double()
    torch.testing.assert_close(norm.mean, whole.mean(0))
    torch.testing.assert_close(norm.var, whole.var(0, unbiased=False))
    x = torch.tensor([[7.0, 7.0, 1000.0]])
    y = norm(x)
    assert y[0, 2] == 5.0 and abs(float(y[0, 0])) < 0.5  # clipped; near the mean


def test_obs_statistics_travel_with_the_weights():
    a = _agent(norm_obs=True)
    rows = a.flatten(Rollout(8, 2, (3,), torch.float32, CPU, action_size=2), torch.zeros(2))
    rows = rows._replace(obs=torch.randn(16, 3) * 4 + 2)
    a.learn(rows)
    assert float(a.net.obs_norm.count) == 16
    b = _agent(norm_obs=True)
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(b.net.obs_norm.mean, a.net.obs_norm.mean)
    obs = torch.randn(5, 3)
    torch.testing.assert_close(b.act(obs, greedy=True)[0], a.act(obs, greedy=True)[0])


def test_return_scaler_divides_by_the_std_of_discounted_returns():
    scaler = ReturnScaler(2, gamma=0.9, clip=10.0)
    rng = np.random.default_rng(0)
    returns, ret = [], np.zeros(2)
    for t in range(300):
        r = rng.normal(3.0, 1.0, 2)
        ended = np.array([t % 50 == 49, False])
        scaled = scaler(r, ended)
        ret = ret * 0.9 + r
        returns.append(ret.copy())
        ret[ended] = 0.0
        assert scaled.dtype == np.float32
    np.testing.assert_allclose(scaled, r / np.sqrt(np.var(returns) + 1e-8), rtol=1e-5)
    restored = ReturnScaler(2, gamma=0.9)
    restored.load_state_dict(scaler.state_dict())
    np.testing.assert_array_equal(restored(r, ended), scaler(r, ended))


@pytest.mark.parametrize("captured", [False, True])
def test_continuous_learn_through_the_capture_wrapper_equals_eager(captured):
    """The Gaussian policy's minibatch steps on the capture wrapper's static buffers (the
    path a GPU replays) give the same parameters and actions as plain calls."""
    from rlamd.algos.ppo import capture_ppo

    new = capture_ppo(_agent(num_minibatches=4, update_epochs=2), "auto")
    if captured:
        new.minibatch_step.capture = new.act.capture = True
    old = _agent(num_minibatches=4, update_epochs=2)
    ro = Rollout(8, 4, (3,), torch.float32, CPU, action_size=2)
    ro.obs.normal_(generator=torch.Generator().manual_seed(5))
    a, lp, v = old.act(ro.obs.reshape(-1, 3))
    new.generator.set_state(old.generator.get_state())
    ro.actions.copy_(a.view(8, 4, 2))
    ro.logprobs.copy_(lp.view(8, 4))
    ro.values.copy_(v.view(8, 4))
    ro.rewards.copy_(ro.actions[..., 1])
    rows = new.flatten(ro, torch.zeros(4))
    new.learn(rows)
    for _epoch in range(2):
        perm = torch.randperm(32, generator=old.generator)
        for start in range(0, 32, 8):
            old.minibatch_step(rows, perm[start : start + 8])
    for p, q in zip(new.params, old.params, strict=True):
        assert torch.equal(p, q)
    obs = torch.randn(6, 3)
    assert all(torch.equal(x, y) for x, y in zip(new.act(obs), old.act(obs), strict=True))
