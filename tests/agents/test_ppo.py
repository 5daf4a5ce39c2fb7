"""PPO: GAE against brute force, the loss pieces, acting, and state round trips."""

from __future__ import annotations

import pytest
import torch

from rlamd.agents.ppo import PPO, PPOConfig, Rollout, compute_gae
from rlamd.precision import Precision

CPU = torch.device("cpu")


def brute_force_gae(rewards, values, terminated, ended, bootstrap, last_value, gamma, lam):
    """Per env, walk forward from every t summing (gamma*lam)^k deltas until the episode ends."""
    T, N = rewards.shape
    adv = torch.zeros(T, N, dtype=torch.float64)
    for n in range(N):
        for t in range(T):
            total, coef = 0.0, 1.0
            for k in range(t, T):
                if ended[k, n]:
                    nxt = 0.0 if terminated[k, n] else bootstrap[k, n]
                else:
                    nxt = values[k + 1, n] if k + 1 < T else last_value[n]
                delta = rewards[k, n] + gamma * nxt - values[k, n]
                total += coef * delta
                if ended[k, n]:
                    break
                coef *= gamma * lam
            adv[t, n] = total
    return adv


def test_gae_equals_brute_force_with_truncation_and_termination_inside():
    g = torch.Generator().manual_seed(0)
    T, N = 40, 3
    ro = Rollout(T, N, (2,), torch.float32, CPU)
    ro.rewards.copy_(torch.randn(T, N, generator=g))
    ro.values.copy_(torch.randn(T, N, generator=g))
    term = torch.rand(T, N, generator=g) < 0.08
    trunc = ~term & (torch.rand(T, N, generator=g) < 0.08)
    assert term.any() and trunc.any()
    ro.terminated.copy_(term.float())
    ro.ended.copy_((term | trunc).float())
    ro.bootstrap.copy_(torch.where(trunc, torch.randn(T, N, generator=g), torch.zeros(T, N)))
    last = torch.randn(N, generator=g)
    adv, ret = compute_gae(ro.rewards, ro.values, ro.ended, ro.next_values(last), 0.99, 0.95)
    ref = brute_force_gae(
        ro.rewards.double(),
        ro.values.double(),
        term,
        term | trunc,
        ro.bootstrap.double(),
        last.double(),
        0.99,
        0.95,
    )
    torch.testing.assert_close(adv.double(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ret, adv + ro.values)


def _agent(**kw):
    torch.manual_seed(0)
    return PPO(PPOConfig(**kw), (4,), 3, CPU, Precision("fp32", CPU), seed=0)


def test_act_samples_from_the_policy():
    agent = _agent()
    obs = torch.randn(1, 4).expand(20_000, 4)
    a, lp, _v = agent.act(obs)
    logits, _ = agent.net(obs[:1])
    probs = torch.softmax(logits, 1)[0]
    freq = torch.bincount(a, minlength=3).float() / a.numel()
    torch.testing.assert_close(freq, probs, atol=0.015, rtol=0)
    torch.testing.assert_close(lp, torch.log(probs)[a])
    assert torch.equal(agent.act(obs[:5], greedy=True)[0], logits.argmax(1).expand(5))


def _rollout(T=16, N=2):
    g = torch.Generator().manual_seed(3)
    ro = Rollout(T, N, (4,), torch.float32, CPU)
    ro.obs.copy_(torch.randn(T, N, 4, generator=g))
    ro.rewards.copy_(torch.randn(T, N, generator=g))
    return ro


def test_update_moves_towards_advantaged_actions_and_logs_ppo_keys():
    # gamma 0: each step's advantage is its own reward less the value, so the later steps'
    # random actions do not blur which action was good.
    agent = _agent(num_minibatches=2, update_epochs=4, lr=1e-2, gamma=0.0)
    ro = _rollout()
    with torch.no_grad():
        flat = ro.obs.reshape(-1, 4)
        a, lp, v = agent.act(flat)
    ro.actions.copy_(a.view(16, 2))
    ro.logprobs.copy_(lp.view(16, 2))
    ro.values.copy_(v.view(16, 2))
    ro.rewards.copy_(torch.where(ro.actions == 0, 1.0, -1.0))  # action 0 is good
    before = torch.softmax(agent.net(flat)[0], 1)[:, 0].mean()
    agent.update(ro, torch.zeros(2))
    after = torch.softmax(agent.net(flat)[0], 1)[:, 0].mean()
    assert after > before
    m = agent.read_metrics()
    for key in (
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
        "losses/approx_kl",
        "losses/clipfrac",
        "losses/explained_variance",
    ):
        assert key in m
    assert agent.updates == 8


def test_learning_rate_anneals():
    agent = _agent(lr=1e-3)
    agent.set_progress(0.25)
    assert agent.optimizer.param_groups[0]["lr"] == pytest.approx(7.5e-4)


def test_state_round_trip():
    a, b = _agent(), _agent(lr=0.1)
    b.load_state_dict(a.state_dict())
    obs = torch.randn(8, 4)
    assert torch.equal(a.act(obs)[0], b.act(obs)[0])


def test_bad_config():
    with pytest.raises(ValueError, match="num_minibatches=0"):
        PPOConfig(num_minibatches=0)
    with pytest.raises(ValueError, match="gae_lambda=1.5"):
        PPOConfig(gae_lambda=1.5)


@pytest.mark.parametrize("captured", [False, True])
def test_learn_through_the_capture_wrapper_equals_slicing_a_permutation(captured):
    """The one learn path (through the capture wrapper: static row buffers as a GPU
    replays them, or eager) == the plain per-slice loop over each epoch's permutation."""
    from rlamd.algos.ppo import capture_ppo

    new = capture_ppo(_agent(num_minibatches=4, update_epochs=3), "auto")
    if captured:
        new.minibatch_step.capture = new.act.capture = True
    old = _agent(num_minibatches=4, update_epochs=3)
    ro = _rollout(T=16, N=2)
    with torch.no_grad():
        a, lp, v = old.act(ro.obs.reshape(-1, 4))
    new.generator.set_state(old.generator.get_state())
    ro.actions.copy_(a.view(16, 2))
    ro.logprobs.copy_(lp.view(16, 2))
    ro.values.copy_(v.view(16, 2))
    rows = new.flatten(ro, torch.zeros(2))
    new.learn(rows)
    B, mb = 32, 8
    for _epoch in range(3):
        perm = torch.randperm(B, generator=old.generator)
        for start in range(0, B, mb):
            old.minibatch_step(rows, perm[start : start + mb])
    assert new.updates == 12
    for p, q in zip(new.params, old.params, strict=True):
        assert torch.equal(p, q)
    obs = torch.randn(8, 4)
    assert all(torch.equal(x, y) for x, y in zip(new.act(obs), old.act(obs), strict=True))


def test_target_kl_stops_the_epochs_early():
    agent = _agent(num_minibatches=2, update_epochs=10, lr=0.5, target_kl=1e-6)
    ro = _rollout()
    ro.actions.random_(0, 3)
    agent.update(ro, torch.zeros(2))
    assert 2 <= agent.updates < 20


def test_an_evaluation_epsilon_is_refused_not_ignored():
    """``python -m rlamd.evaluate --epsilon`` on a PPO run: PPO plays its policy's own
    actions, so an epsilon is refused in one line instead of silently doing nothing."""
    from rlamd.algos import get_algorithm
    from rlamd.config import ConfigError
    from rlamd.config.sections import RunConfig

    algo, agent, cfg = get_algorithm("ppo"), _agent(), RunConfig()
    with pytest.raises(ConfigError, match=r"^--epsilon=0\.05 \(ppo plays .*; accepted: no --"):
        algo.policy(agent, cfg, 0.05)
    obs = torch.randn(6, 4)
    assert algo.policy(agent, cfg, None)(obs).shape == (6,)
    assert algo.policy(agent, cfg, 0.0)(obs).shape == (6,)  # 0: what the default means
