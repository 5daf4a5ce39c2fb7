"""Continuous actions in the replay, checked by hand: the vectors come back as stored, with
their n-step returns and bootstraps, and a Buffer is built from the parts passed in."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlamd.replay import (
    Buffer,
    PrioritizedSampler,
    TransitionStorage,
    UniformSampler,
    bytes_per_transition,
)


def _storage(**kw) -> TransitionStorage:
    return TransitionStorage(
        2 * 10, 2, (1,), torch.float32, action_shape=(3,), n_step=2, gamma=0.5, **kw
    )


def test_box_actions_come_back_as_stored_with_their_two_step_returns():
    """Stream s, step t: obs 10s + t, action (t, -t, s), reward t + 1. With n = 2 and
    gamma 0.5 the record of step t returns r_t + 0.5 r_{t+1} = 1.5 t + 2 and bootstraps
    from obs t + 2 with discount 0.25."""
    buf = Buffer(_storage(), UniformSampler(20))
    for t in range(6):
        obs = np.array([[t], [10 + t]], dtype=np.float32)
        acts = np.array([[t, -t, 0], [t, -t, 1]], dtype=np.float32)
        buf.add(obs, acts, np.full(2, t + 1.0), np.zeros(2, bool), np.zeros(2, bool))
    assert len(buf) == 2 * 4  # steps 0..3 have their 2-step window
    b = buf.sample(8)
    assert b.actions.dtype == torch.float32 and b.actions.shape == (8, 3)
    t = b.obs[:, 0] % 10
    stream = (b.obs[:, 0] >= 10).float()
    assert torch.equal(b.actions, torch.stack([t, -t, stream], 1))
    assert torch.allclose(b.returns, 1.5 * t + 2)
    assert torch.equal(b.next_obs[:, 0], b.obs[:, 0] + 2)
    assert torch.allclose(b.discounts, torch.full((8,), 0.25))
    assert torch.equal(b.weights, torch.ones(8))


def test_a_terminal_ends_the_return_and_the_bootstrap_of_a_box_action():
    buf = Buffer(_storage(), UniformSampler(20))
    z, f = np.zeros(2, bool), np.array([True, True])
    for t in range(3):
        obs = np.full((2, 1), float(t), dtype=np.float32)
        done = f if t == 1 else z
        final = np.full((2, 1), 99.0, dtype=np.float32) if t == 1 else None
        buf.add(obs, np.full((2, 3), 0.5 * t), np.full(2, t + 1.0), done, done, final)
    idx = torch.from_numpy(buf.storage.active_indices())
    win = buf.storage.window(idx)
    rows = {
        round(float(o)): (float(g), float(d))
        for o, g, d in zip(buf.storage.stacks(idx)[:, 0], win.returns, win.discounts, strict=True)
    }
    # step 0: 1 + 0.5 * 2 (ends in the terminal: no bootstrap); step 1: 2, no bootstrap
    assert rows[0] == (2.0, 0.0) and rows[1] == (2.0, 0.0)
    assert buf.storage.read_actions(idx)[:, 0].unique().tolist() == [0.0, 0.5]


def test_actions_of_another_shape_are_refused_in_one_line():
    buf = Buffer(_storage(), UniformSampler(20))
    obs = np.zeros((2, 1), dtype=np.float32)
    with pytest.raises(ValueError, match=r"actions has shape \(2,\); expected \(2, 3\)"):
        buf.add(obs, np.zeros(2), np.zeros(2), np.zeros(2, bool), np.zeros(2, bool))


def test_the_sampler_must_cover_the_storage():
    with pytest.raises(
        ValueError, match="the sampler covers 30 records on cpu; accepted: the storage's 20 on cpu"
    ):
        Buffer(_storage(), UniformSampler(30))


def test_a_prioritized_sampler_composes_the_same_way_and_keeps_float_actions():
    buf = Buffer(_storage(), PrioritizedSampler(20, alpha=1.0), seed=3)
    for t in range(8):
        acts = np.full((2, 3), t / 10, dtype=np.float32)
        buf.add(
            np.full((2, 1), float(t), dtype=np.float32),
            acts,
            np.ones(2),
            np.zeros(2, bool),
            np.zeros(2, bool),
        )
    b = buf.sample(4, beta=1.0)
    buf.update_priorities(b.indices, torch.full((4,), 5.0))
    leaves = buf.sampler.tree.leaves[b.indices]
    assert torch.allclose(leaves, torch.full((4,), 5.0 + 1e-6))
    assert torch.allclose(b.actions, (b.obs[:, :1] / 10).expand(4, 3))


def test_bytes_per_transition_counts_the_action_vector_and_the_sampler_passed():
    # float32 obs (4 B) + 3 float32 actions (12 B) + reward (4 B) + flags (1 B) = 21 B
    per = bytes_per_transition(
        (1,), torch.float32, 1, sampler=UniformSampler, capacity=1024, action_shape=(3,)
    )
    prio = bytes_per_transition(
        (1,), torch.float32, 1, sampler=PrioritizedSampler, capacity=1024, action_shape=(3,)
    )
    st = TransitionStorage(1024, 1, (1,), torch.float32, action_shape=(3,))
    assert st.bytes_per_record() == 21
    assert per == 21 + UniformSampler(1024).nbytes() / 1024
    assert prio == 21 + PrioritizedSampler(1024).nbytes() / 1024
    buf = Buffer(st, PrioritizedSampler(1024))
    assert buf.nbytes_per_transition() == prio


def test_a_state_without_contents_empties_storage_and_sampler_in_place():
    buf = Buffer(_storage(), PrioritizedSampler(20))
    for _ in range(5):
        buf.add(
            np.zeros((2, 1), np.float32),
            np.zeros((2, 3)),
            np.ones(2),
            np.zeros(2, bool),
            np.zeros(2, bool),
        )
    b = buf.sample(2, beta=0.5)
    buf.update_priorities(b.indices, torch.full((2,), 9.0))
    tree, state = buf.sampler.tree.flat, buf.sampler.state
    buf.load_state_dict(buf.state_dict(include_contents=False))
    assert len(buf) == 0 and buf.sampler.tree.flat is tree and buf.sampler.state is state
    assert float(tree.sum()) == 0.0 and state.tolist() == [1.0, 0.0]
