"""Frames stored once: every stack and every n-step target against what the env produced."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from rlamd.envs import make_env
from rlamd.replay import PrioritizedReplayBuffer, ReplayBuffer
from rlamd.replay.storage import TransitionStorage

from .helpers import CountingEnv


def test_every_stack_equals_what_the_env_produced_across_episodes_and_wraparound():
    """Breakout with random play: short episodes, and 3 wraps of a small buffer."""
    n, k = 3, 4
    env = make_env("breakout", num_envs=n)
    buf = ReplayBuffer(3 * 200, n, (k, 84, 84), torch.uint8, frame_stack=k, num_actions=4)
    st = buf.storage
    C = st.per_stream
    expected_obs: dict[int, np.ndarray] = {}
    expected_next: dict[int, np.ndarray] = {}
    obs = env.reset(seed=3)
    rng = np.random.default_rng(0)
    episodes_ended = 0
    for step in range(650):
        a = rng.integers(0, 4, n)
        s = env.step(a)
        ptr = st._ptr.copy() + (k - 1 if step == 0 else 0)
        buf.add(obs, a, s.reward, s.terminated, s.done, s.final_obs)
        for i in range(n):
            pos = i * C + ptr[i] % C
            expected_obs[pos] = obs[i]
            expected_next[pos] = s.final_obs[i] if s.done[i] else s.obs[i]
        episodes_ended += int(s.done.sum())
        obs = s.obs
    assert episodes_ended >= 3
    active = torch.from_numpy(st.active_indices())
    assert len(buf) == active.numel() > 500
    got = st.stacks(active).numpy()
    nxt = st.stacks(st.window(active).next_index).numpy()
    for j, idx in enumerate(active.tolist()):
        np.testing.assert_array_equal(got[j], expected_obs[idx])
        np.testing.assert_array_equal(nxt[j], expected_next[idx])
    batch = buf.sample(128)
    for j, idx in enumerate(batch.indices.tolist()):
        np.testing.assert_array_equal(batch.obs[j].numpy(), expected_obs[idx])
        np.testing.assert_array_equal(batch.next_obs[j].numpy(), expected_next[idx])


def test_buffer_created_mid_episode_keeps_the_history_frames():
    env = make_env("breakout", num_envs=2)
    obs = env.reset(seed=0)
    for _ in range(10):
        obs = env.step(np.ones(2, dtype=np.int64)).obs
    buf = ReplayBuffer(100, 2, (4, 84, 84), torch.uint8, frame_stack=4, num_actions=4)
    first = obs
    for _ in range(3):
        s = env.step(np.ones(2, dtype=np.int64))
        buf.add(obs, np.ones(2), s.reward, s.terminated, s.done, s.final_obs)
        obs = s.obs
    idx = torch.from_numpy(buf.storage.active_indices())
    stacks = buf.storage.stacks(idx)
    # the oldest transition of stream 0 is the first obs we added, history frames included
    oldest = min(i for i in idx.tolist() if i < buf.storage.per_stream)
    np.testing.assert_array_equal(stacks[idx.tolist().index(oldest)].numpy(), first[0])


@pytest.mark.parametrize("n_step", [1, 3, 5])
def test_n_step_targets_equal_brute_force(n_step):
    gamma, S = 0.9, 3
    env = CountingEnv(S, seed=n_step, p_term=0.08, p_trunc=0.06)
    buf = ReplayBuffer(3 * 50, S, (2,), torch.float32, num_actions=4, n_step=n_step, gamma=gamma)
    history = {s: [] for s in range(S)}
    for _ in range(140):  # ~2.8 wraps
        obs, a, r, term, _trunc, done, final, _reset = env.step()
        buf.add(obs, a, r, term, done, final)
        for s in range(S):
            history[s].append((obs[s, 1], r[s], term[s], done[s], final[s]))
    by_id = {}
    for s in range(S):
        h = history[s]
        for t, (oid, *_rest) in enumerate(h):
            G, disc = 0.0, 1.0
            for j in range(n_step):
                _, r, term, done, final = h[t + j] if t + j < len(h) else (None,) * 5
                if r is None:
                    G = None
                    break
                G += disc * r
                disc *= gamma
                if term:
                    disc = 0.0
                if term or done:
                    break
            if G is not None:
                by_id[oid] = (G, disc, final[1])
    active = torch.from_numpy(buf.storage.active_indices())
    w = buf.storage.window(active)
    obs_ids = buf.storage.stacks(active)[:, 1].long().tolist()
    next_ids = buf.storage.stacks(w.next_index)[:, 1].long().tolist()
    checked = 0
    for j, oid in enumerate(obs_ids):
        G, disc, nxt = by_id[oid]
        assert w.returns[j].item() == pytest.approx(G, abs=1e-5)
        assert w.discounts[j].item() == pytest.approx(disc, abs=1e-6)
        if disc > 0:
            assert next_ids[j] == nxt
        checked += 1
    assert checked > 100
    # truncations bootstrap, terminations do not, and both happened
    assert (w.discounts == 0).any() and (w.discounts > 0).any()


def _run(buf, seed):
    env = CountingEnv(2, seed=seed)
    for _ in range(60):
        obs, a, r, term, _trunc, done, final, _ = env.step()
        buf.add(obs, a, r, term, done, final)
    out = []
    for _ in range(5):
        b = buf.sample(16, beta=0.4)
        buf.update_priorities(b.indices, b.returns.abs())
        out.append(b.indices)
    return torch.stack(out)


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_same_seed_same_samples(backend):
    def make(seed):
        return PrioritizedReplayBuffer(100, 2, (2,), seed=seed, backend=backend)

    assert torch.equal(_run(make(1), 0), _run(make(1), 0))
    assert not torch.equal(_run(make(1), 0), _run(make(2), 0))


def test_torch_and_numba_backends_sample_the_same():
    def make(b):
        return PrioritizedReplayBuffer(100, 2, (2,), seed=5, alpha=1.0, backend=b)

    assert torch.equal(_run(make("torch"), 0), _run(make("numba"), 0))


def test_state_dict_round_trip_with_and_without_contents():
    a = PrioritizedReplayBuffer(100, 2, (2,), seed=3)
    _run(a, 0)
    b = PrioritizedReplayBuffer(100, 2, (2,), seed=99)
    b.load_state_dict(a.state_dict())
    assert len(b) == len(a)
    assert torch.equal(a.sample(32).indices, b.sample(32).indices)
    c = PrioritizedReplayBuffer(100, 2, (2,))
    c.load_state_dict(a.state_dict(include_contents=False))
    assert len(c) == 0
    with pytest.raises(ValueError, match="capacity=100, this buffer has 200"):
        PrioritizedReplayBuffer(200, 2, (2,)).load_state_dict(a.state_dict())


@pytest.mark.parametrize("frame_stack", [1, 2])
def test_ended_episodes_of_a_restored_replay_never_join_the_next_ones(frame_stack):
    """A resumed run resets its envs: the restored replay's episodes in progress are
    abandoned (``end_episodes``), so no n-step return, next observation or frame stack of
    a saved transition reaches into the new episode."""
    shape = (frame_stack, 1) if frame_stack > 1 else (1,)

    def obs(value: float) -> np.ndarray:
        return np.full((1, *shape), value, np.float32)

    def buffer() -> ReplayBuffer:
        return ReplayBuffer(
            20, 1, shape, torch.float32, n_step=3, gamma=0.5, frame_stack=frame_stack,
            num_actions=2,
        )  # fmt: skip

    no = np.zeros(1, bool)
    a = buffer()
    for t in range(4):  # an episode in progress: observations 1..4, reward 1 each
        a.add(obs(t + 1.0), np.zeros(1, np.int64), np.ones(1, np.float32), no, no)
    b = buffer()
    b.load_state_dict(a.state_dict())
    b.storage.end_episodes()
    for t in range(6):  # the resumed run's new episode: observations 100.., reward 10 each
        b.add(obs(100.0 + t), np.zeros(1, np.int64), np.full(1, 10.0, np.float32), no, no)
    st = b.storage
    index = torch.from_numpy(st.active_indices())
    window = st.window(index)
    first = st.stacks(index)[:, -1, 0] if frame_stack > 1 else st.stacks(index)[:, 0]
    after = st.stacks(window.next_index)
    after = after[:, -1, 0] if frame_stack > 1 else after[:, 0]
    old, new = first < 100, first >= 100
    assert first[old].tolist() == [1.0] and after[old].tolist() == [4.0]  # obs 2-4: abandoned
    assert window.returns[old].tolist() == [1.75]
    assert first[new].tolist() == [100.0, 101.0, 102.0] and (after[new] >= 103).all()
    assert window.returns[new].tolist() == [17.5] * 3
    if frame_stack > 1:  # the new episode's first stack holds no frame of the old one
        stacked = st.stacks(index[new])[:, 0, 0]
        assert stacked.tolist() == [0.0, 100.0, 101.0]


def test_clear_errors():
    with pytest.raises(ValueError, match="capacity=0"):
        ReplayBuffer(0, 1, (2,))
    with pytest.raises(ValueError, match="at least 32"):
        ReplayBuffer(20, 8, (2,))
    buf = ReplayBuffer(100, 2, (4, 84, 84), torch.uint8, frame_stack=4)
    good = np.zeros((2, 4, 84, 84), np.uint8)
    z2, f2 = np.zeros(2), np.zeros(2, bool)
    with pytest.raises(ValueError, match=r"obs has shape \(2, 4, 80, 80\)"):
        buf.add(np.zeros((2, 4, 80, 80), np.uint8), z2, z2, f2, f2)
    with pytest.raises(ValueError, match="dtype float32"):
        buf.add(good.astype(np.float32), z2, z2, f2, f2)
    with pytest.raises(ValueError, match=r"actions has shape \(3,\)"):
        buf.add(good, np.zeros(3), z2, f2, f2)
    with pytest.raises(ValueError, match="cannot sample batch_size=4: the buffer holds 0"):
        buf.sample(4)
    with pytest.raises(ValueError, match="final_obs is required"):
        buf.add(good, z2, z2, f2, np.ones(2, bool))


def test_bytes_per_atari_transition_at_a_million():
    """1M Atari transitions in <= 7.2 GB: frame + action + reward + flags + both trees."""
    buf = PrioritizedReplayBuffer.__new__(PrioritizedReplayBuffer)
    from rlamd.replay.segment_tree import SegmentTree

    cap = 1_000_000
    tree_bytes = 2 * SegmentTree(cap, backend="torch").nbytes()
    per_record = 84 * 84 + 1 + 4 + 1
    assert per_record + tree_bytes / cap <= 7200
    small = PrioritizedReplayBuffer(
        32**3, 8, (4, 84, 84), torch.uint8, frame_stack=4, num_actions=18
    )
    assert small.storage.bytes_per_record() == per_record
    del buf


@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize(
    ("capacity", "obs_shape", "dtype", "stack", "actions"),
    [(1024, (4, 84, 84), torch.uint8, 4, 6), (1000, (3,), torch.float32, 1, 300)],
)
def test_bytes_per_transition_is_what_the_buffer_allocates(
    prioritized, capacity, obs_shape, dtype, stack, actions
):
    from rlamd.replay import PrioritizedReplayBuffer, ReplayBuffer, bytes_per_transition

    cls = PrioritizedReplayBuffer if prioritized else ReplayBuffer
    buf = cls(capacity, 4, obs_shape, dtype, frame_stack=stack, num_actions=actions)
    st = buf.storage
    tensors = (st.frames, st.actions, st.rewards, st.flags)
    trees = [buf.sampler.tree] + ([buf.sampler.min_tree] if prioritized else [])
    allocated = sum(t.numel() * t.element_size() for t in tensors)
    allocated += sum(t.flat.numel() * t.flat.element_size() for t in trees)
    per_t = bytes_per_transition(obs_shape, dtype, stack, actions, prioritized, capacity)
    assert per_t == pytest.approx(allocated / capacity, rel=1e-12)
    assert buf.nbytes_per_transition() == per_t
    # Without a capacity: the unpadded share, exact for a power of the arity (1024 = 32**2).
    loose = bytes_per_transition(obs_shape, dtype, stack, actions, prioritized)
    assert loose == pytest.approx(per_t) if capacity == 1024 else loose < per_t


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads Linux's /proc")
def test_a_host_ring_takes_memory_as_it_fills_not_when_built():
    """A million-frame Atari ring is 7 GB: zero-filling it up front held a run's first line
    back 25 s. The host arrays come from the OS as zero pages, so building one costs next to
    no resident memory, and the first write still reads back as zeros around it."""
    page = os.sysconf("SC_PAGE_SIZE")

    def resident() -> int:
        return int(Path("/proc/self/statm").read_text().split()[1]) * page

    before = resident()
    st = TransitionStorage(
        200_000, 8, (4, 84, 84), torch.uint8, frame_stack=4, num_actions=4, n_step=3
    )
    grown = resident() - before
    assert st.frames.numel() == 200_000 * 84 * 84  # 1.4 GB of frames
    assert grown < 100 * 2**20, f"building the ring made {grown / 2**20:.0f} MiB resident"
    st.frames[1000] = 7
    assert int(st.frames[999:1002].sum()) == 7 * 84 * 84
