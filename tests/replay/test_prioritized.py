"""Prioritized sampling frequencies and importance weights against the formulas."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlamd.replay import PrioritizedReplayBuffer

from .helpers import CountingEnv, chi2_critical, chi2_stat


def fill(buf, env, steps):
    for _ in range(steps):
        obs, a, r, term, _trunc, done, final, _ = env.step()
        buf.add(obs, a, r, term, done, final)


def frequencies(buf, draws, batch=256, beta=0.4):
    counts = np.zeros(buf.capacity)
    for _ in range(draws):
        idx = buf.sample(batch, beta=beta).indices.numpy()
        np.add.at(counts, idx, 1)
    return counts


def make(capacity=400, num_envs=4, alpha=0.6, seed=0, backend="auto"):
    return PrioritizedReplayBuffer(
        capacity,
        num_envs,
        (2,),
        torch.float32,
        num_actions=4,
        n_step=1,
        alpha=alpha,
        seed=seed,
        backend=backend,
    )


@pytest.mark.parametrize("skew", ["random", "skewed"])
@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_frequencies_match_p_alpha_after_updates_and_wraparound(skew, backend):
    buf, env = make(backend=backend), CountingEnv(4, seed=1)
    fill(buf, env, 250)  # 1000 steps into 400 slots: wrapped twice
    active = torch.from_numpy(buf.storage.active_indices())
    rng = np.random.default_rng(2)
    if skew == "random":
        p = rng.uniform(0.0, 5.0, active.numel())
    else:  # a few huge priorities, many tiny ones
        p = np.where(rng.random(active.numel()) < 0.05, 1000.0, 0.01)
    buf.update_priorities(active, torch.tensor(p, dtype=torch.float32))
    counts = frequencies(buf, 200)
    assert counts[np.setdiff1d(np.arange(buf.capacity), active.numpy())].sum() == 0
    pa = (p + buf.sampler.epsilon) ** buf.sampler.alpha
    probs = pa / pa.sum()
    observed = counts[active.numpy()]
    if skew == "skewed":
        # Pool the tiny-priority items so each chi-square cell expects >= 5 draws.
        big = p > 1
        observed = np.append(observed[big], observed[~big].sum())
        probs = np.append(probs[big], probs[~big].sum())
    assert chi2_stat(observed, probs) < chi2_critical(len(probs) - 1)


def test_new_items_get_running_max_priority():
    buf, env = make(alpha=1.0), CountingEnv(4, seed=3)
    fill(buf, env, 20)
    b = buf.sample(8)
    buf.update_priorities(b.indices, torch.full((8,), 7.0))
    fill(buf, env, 5)
    newest = torch.from_numpy(buf.storage.active_indices())
    leaves = buf.sampler.tree.leaves[newest]
    assert torch.isclose(leaves.max(), torch.tensor(7.0 + buf.sampler.epsilon))
    assert buf.sampler.max_priority.item() == pytest.approx(7.0 + 1e-6)


def test_importance_weights_equal_the_formula():
    buf, env = make(alpha=0.7), CountingEnv(4, seed=4)
    fill(buf, env, 60)
    active = torch.from_numpy(buf.storage.active_indices())
    p = torch.rand(active.numel(), generator=torch.Generator().manual_seed(0)) * 3
    buf.update_priorities(active, p)
    beta = 0.5
    b = buf.sample(64, beta=beta)
    pa = (p.double() + 1e-6) ** 0.7
    n = active.numel()
    P = pa / pa.sum()
    w_all = (n * P) ** -beta
    lookup = dict(zip(active.tolist(), (w_all / w_all.max()).tolist(), strict=True))
    expected = torch.tensor([lookup[i] for i in b.indices.tolist()])
    torch.testing.assert_close(b.weights.double(), expected.double(), rtol=1e-4, atol=1e-6)
    assert b.weights.max() <= 1.0 + 1e-6


def test_update_on_retired_record_does_not_revive_it():
    buf, env = make(capacity=40, num_envs=4), CountingEnv(4, seed=5, p_term=0, p_trunc=0)
    fill(buf, env, 20)
    b = buf.sample(len(buf))
    fill(buf, env, 1)  # overwrites each stream's oldest record; the new one is pending
    retired = [i for i in b.indices.tolist() if not buf.storage._active[i]]
    buf.update_priorities(b.indices, torch.full((b.indices.numel(),), 5.0))
    assert retired and (buf.sampler.tree.leaves[retired] == 0).all()


def test_priority_errors_are_clear():
    buf, env = make(), CountingEnv(4, seed=6)
    fill(buf, env, 10)
    b = buf.sample(4)
    with pytest.raises(ValueError, match="finite and >= 0"):
        buf.update_priorities(b.indices, torch.tensor([1.0, -1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="finite and >= 0"):
        buf.update_priorities(b.indices, torch.tensor([1.0, float("nan"), 2.0, 3.0]))
    with pytest.raises(ValueError, match="beta=1.5"):
        buf.sample(4, beta=1.5)
    with pytest.raises(ValueError, match="alpha=-0.1"):
        make(alpha=-0.1)


def test_unvalidated_bad_priorities_are_dropped_and_counted():
    """The GPU path (validate=False) never syncs: bad values keep the old priority."""
    buf = PrioritizedReplayBuffer(400, 4, (2,), torch.float32, num_actions=4, validate=False)
    fill(buf, CountingEnv(4, seed=7), 10)
    b = buf.sample(4)
    before = buf.sampler.tree.leaves[b.indices].clone()
    buf.update_priorities(b.indices, torch.tensor([float("inf"), -2.0, float("nan"), 0.5]))
    after = buf.sampler.tree.leaves[b.indices]
    assert torch.equal(after[:3], before[:3]) and buf.sampler.rejected.item() == 3


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_beta_as_a_device_tensor_equals_the_float(backend):
    buf, env = make(backend=backend), CountingEnv(4, seed=8)
    fill(buf, env, 40)
    active = torch.from_numpy(buf.storage.active_indices())
    buf.update_priorities(active, torch.rand(active.numel()) * 3)
    r = torch.rand(16, generator=torch.Generator().manual_seed(0))
    as_float = buf.sampler.sample(16, beta=0.55, uniforms=r)
    as_tensor = buf.sampler.sample(16, beta=torch.tensor(0.55, dtype=torch.float64), uniforms=r)
    assert torch.equal(as_float[0], as_tensor[0]) and torch.equal(as_float[1], as_tensor[1])
    assert as_float[1].min() < 1.0  # the weights depend on beta: not all ones
    with pytest.raises(ValueError, match=r"uniforms has shape \(8,\); accepted: \(16,\)"):
        buf.sampler.sample(16, uniforms=r[:8])
