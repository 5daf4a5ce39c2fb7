"""DQN chunks ship each env's newest frame, not whole stacks: the learner's shard rebuilds
the stacks exactly and ends up holding what whole stacks would have given it."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from rlamd.algos import build_agent
from rlamd.algos.dqn_apex import ApexSource, Chunk, ReplayShard, ship_frames, unship_frames
from rlamd.collector import Collector
from rlamd.config.sections import RunConfig
from rlamd.envs import make_env

from .helpers import sections

K, H, W = 4, 6, 5


def _stacked_streams(T: int, E: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(T, E, K, H, W)`` observations of a zero-padded frame stacker whose episodes end at
    random (``done``), as Atari envs give them, and the ``(T, E)`` done flags."""
    rng = np.random.default_rng(seed)
    stacks = np.zeros((T, E, K, H, W), np.uint8)
    done = rng.random((T, E)) < 0.12
    done[3, :] = True  # every env resets at once too
    for e in range(E):
        cur = np.zeros((K, H, W), np.uint8)
        cur[-1] = rng.integers(1, 256, (H, W))  # mid-episode history before the chunk
        cur[:-1] = rng.integers(1, 256, (K - 1, H, W))
        for t in range(T):
            stacks[t, e] = cur
            cur = np.concatenate([cur[1:], rng.integers(1, 256, (1, H, W), dtype=np.uint8)])
            if done[t, e]:  # reset: zeros before the first frame of the new episode
                cur = np.zeros_like(cur)
                cur[-1] = rng.integers(1, 256, (H, W))
    return stacks, done


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_frames_rebuild_the_whole_stacks_exactly(seed):
    stacks, done = _stacked_streams(T=40, E=3, seed=seed)
    frames, restacks = ship_frames(stacks)
    assert frames.shape == (40, 3, H, W)
    np.testing.assert_array_equal(unship_frames(frames, restacks), stacks)
    # Whole stacks go only where the chain breaks: step 0 and after every reset.
    shipped = {(t, int(e)) for t, (rows, _) in restacks.items() if t for e in rows}
    assert shipped == {(t + 1, e) for t, e in zip(*np.nonzero(done[:-1]), strict=True)}


def test_a_break_without_a_done_flag_is_shipped_whole_too():
    stacks, _ = _stacked_streams(T=10, E=2, seed=5)
    stacks[6, 1, 0] = 7  # an env whose stack is not the previous one shifted by a frame
    frames, restacks = ship_frames(stacks)
    assert 1 in restacks[6][0]
    np.testing.assert_array_equal(unship_frames(frames, restacks), stacks)


def test_a_frames_chunk_without_its_first_stacks_is_refused():
    stacks, _ = _stacked_streams(T=5, E=2, seed=0)
    frames, restacks = ship_frames(stacks)
    restacks[0] = (restacks[0][0][:1], restacks[0][1][:1])
    with pytest.raises(ValueError, match="whole stacks of all 2 rows at step 0"):
        unship_frames(frames, restacks)


def _breakout(ship: bool, envs: int = 3):
    cfg = RunConfig.from_dict(
        {
            "train": {
                "env": "breakout",
                "algo": "dqn",
                "device": "cpu",
                "precision": "fp32",
                "seed": 4,
            },
            "dqn": {"buffer_size": 4_000, "n_step": 3, "ship_frames": ship},
            # 30 agent steps per episode: every chunk below holds truncations and resets.
            "atari": {"max_episode_frames": 120, "backend": "gymnasium"},
            "ray": {"envs_per_worker": envs},
        }
    )
    cpu = torch.device("cpu")
    env = make_env("breakout", num_envs=envs, atari=cfg.atari)
    agent = build_agent(cfg, cpu, env)
    source = ApexSource(cfg, Collector(env, cpu, seed=11), agent, 0)
    shard = ReplayShard(cfg, agent, env, 0, 1, envs, lambda msg: None)
    return source, shard, env


@pytest.mark.slow
def test_breakout_chunks_as_frames_fill_the_shard_exactly_as_whole_stacks_do():
    source, whole_shard, env = _breakout(ship=False)
    _, frames_shard, env2 = _breakout(ship=True)
    try:
        sizes = []
        for _ in range(3):  # consecutive chunks: each starts mid-episode
            chunk, _ = source.collect(40)
            assert chunk.restacks is None and chunk.obs.shape == (40, 3, 4, 84, 84)
            assert (chunk.done & ~chunk.terminated).any()  # truncations
            frames, restacks = ship_frames(chunk.obs)
            shipped = chunk._replace(obs=frames, restacks=restacks)
            np.testing.assert_array_equal(shipped.observations(), chunk.obs)
            whole_shard.feed(chunk, 0)
            frames_shard.feed(shipped, 0)
            sizes.append((len(pickle.dumps(chunk)), len(pickle.dumps(shipped))))
        a, b = whole_shard.replay, frames_shard.replay
        for name in ("frames", "actions", "rewards", "flags"):
            assert torch.equal(getattr(a.storage, name), getattr(b.storage, name)), name
        assert (a.storage._active == b.storage._active).all() and len(a) == len(b) > 0
        idx = torch.from_numpy(a.storage.active_indices())
        assert torch.equal(a.storage.stacks(idx), b.storage.stacks(idx))
        assert torch.equal(a.sampler.tree.leaves, b.sampler.tree.leaves)  # same priorities
        whole, light = map(sum, zip(*sizes, strict=True))
        assert light < 0.4 * whole, (light, whole)
    finally:
        env.close()
        env2.close()


@pytest.mark.slow
def test_a_frames_source_ships_frames_for_stacked_observations_only():
    source, _, env = _breakout(ship=True, envs=2)
    try:
        chunk, _ = source.collect(8)
        assert chunk.obs.shape == (8, 2, 84, 84) and chunk.restacks is not None
        assert chunk.observations().shape == (8, 2, 4, 84, 84)
    finally:
        env.close()
    cfg = sections("dqn", envs_per_worker=2)
    cart = make_env("cartpole", num_envs=2)
    agent = build_agent(cfg, torch.device("cpu"), cart)
    chunk, _ = ApexSource(cfg, Collector(cart, torch.device("cpu"), seed=0), agent, 0).collect(4)
    assert isinstance(chunk, Chunk) and chunk.restacks is None and chunk.obs.shape == (4, 2, 4)
    cart.close()
