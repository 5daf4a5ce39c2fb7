"""Atari pipeline: shapes, both backends, and real scores checked against raw ALE."""

from __future__ import annotations

import numpy as np
import pytest

from rlamd.envs import AtariConfig, make_env


@pytest.mark.parametrize("backend", ["ale", "gymnasium"])
def test_observation_format_is_the_same_for_both_backends(backend):
    env = make_env("breakout", num_envs=3, atari=AtariConfig(backend=backend))
    obs = env.reset(seed=1)
    assert obs.shape == (3, 4, 84, 84) and obs.dtype == np.uint8
    # Frames before the first one of an episode are zeros; the newest is a real screen.
    assert not obs[:, :3].any() and obs[:, 3].any()
    step = env.step(np.ones(3, dtype=np.int64))
    assert step.obs.shape == (3, 4, 84, 84) and step.reward.dtype == np.float32
    np.testing.assert_array_equal(step.obs[:, :3], obs[:, 1:])
    env.close()


@pytest.mark.slow
def test_scores_are_real_game_scores_across_lives():
    """Lock-step against raw ALE playing the same seeds: learning rewards are clipped and
    lives end learning episodes, but the score handed on is the whole game's raw sum."""
    from ale_py.vector_env import AtariVectorEnv

    n = 8
    ours = make_env("space_invaders", num_envs=n, atari=AtariConfig(num_threads=1))
    raw = AtariVectorEnv(
        "space_invaders", n, num_threads=1, autoreset_mode="SameStep", reward_clipping=False
    )
    np.testing.assert_array_equal(ours.reset(seed=7), raw.reset(seed=7)[0])
    rng = np.random.default_rng(0)
    raw_score = np.zeros(n)
    scores, raw_scores, life_ends, big_reward = [], [], 0, False
    for _ in range(1200):
        a = rng.integers(0, 6, n)
        s = ours.step(a)
        obs, r, term, trunc, _ = raw.step(s.actions)  # FIRE may be forced after a lost life
        np.testing.assert_array_equal(s.obs, obs)
        np.testing.assert_array_equal(s.reward, np.clip(r, -1, 1).astype(np.float32))
        big_reward |= bool((r > 1).any())
        raw_score += r
        done = term | trunc
        np.testing.assert_array_equal(s.done, done)
        life_ends += int((s.terminated & ~s.done).sum())
        scores += list(s.episode_return[done])
        raw_scores += list(raw_score[done])
        raw_score[done] = 0
    assert len(scores) >= 4 and life_ends >= 2 * len(scores)
    np.testing.assert_allclose(scores, raw_scores)
    assert big_reward, "Space Invaders scores 5-30 a hit: clipping must have mattered"


def test_evaluation_config_keeps_whole_games():
    env = make_env("breakout", num_envs=2, atari=AtariConfig().for_evaluation())
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    for _ in range(400):
        s = env.step(rng.integers(0, 4, 2))
        np.testing.assert_array_equal(s.terminated & ~s.truncated, s.done & ~s.truncated)


def test_sticky_actions_follow_the_id():
    assert make_env("ALE/Breakout-v5", 1).env.ale is not None  # builds with sticky 0.25
    with pytest.raises(ValueError, match="sticky"):
        AtariConfig(sticky=1.5)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="num_envs=0"):
        make_env("breakout", num_envs=0)
    with pytest.raises(ValueError, match="backend='sdl'; accepted: auto, ale, gymnasium"):
        AtariConfig(backend="sdl")


def test_fire_is_pressed_after_a_lost_life_only_when_learning():
    env = make_env("breakout", num_envs=4, atari=AtariConfig(num_threads=1))
    env.reset(seed=2)
    rng = np.random.default_rng(3)
    lost_before = np.zeros(4, dtype=bool)
    forced = 0
    for _ in range(600):
        a = rng.choice([0, 2, 3], 4)  # never FIRE by choice
        s = env.step(a)
        np.testing.assert_array_equal(s.actions == 1, lost_before)
        forced += int(lost_before.sum())
        lost_before = s.terminated & ~s.done
    assert forced >= 4
    ev = make_env("breakout", num_envs=2, atari=AtariConfig().for_evaluation())
    ev.reset(seed=0)
    for _ in range(300):
        assert not (ev.step(np.zeros(2, dtype=np.int64)).actions == 1).any()
