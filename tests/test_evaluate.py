"""Which episodes an evaluation counts: a plan per env fixed before play, so short
episodes are not favoured by finishing first (``rlamd.evaluate.episode_quota``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlamd.evaluate import episode_quota, evaluate_episodes

SHORT, LONG = 2, 30


class _Uneven(gym.Env):
    """Env 0 of a vector env (reset seed 0) plays ``SHORT``-step episodes, every other env
    ``LONG``-step ones; each step pays 1, so an episode's score is its length."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.length, self.t = LONG, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.length = SHORT if seed == 0 else LONG
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), 1.0, self.t >= self.length, False, {}


def make_uneven() -> gym.Env:
    return _Uneven()


def _zeros(obs: torch.Tensor) -> torch.Tensor:
    return torch.zeros(obs.shape[0], dtype=torch.int64)


@pytest.mark.parametrize(("episodes", "envs"), [(10, 8), (8, 8), (3, 2), (5, 1), (7, 3)])
def test_the_quota_splits_the_episodes_over_the_envs_as_evenly_as_it_can(episodes, envs):
    quota = episode_quota(episodes, envs)
    assert quota.sum() == episodes and len(quota) == envs
    assert quota.max() - quota.min() <= 1


def test_a_fast_env_plays_its_quota_and_no_more():
    """Env 0 ends 15 episodes while the others play one. The former rule (the first 10 to
    end, at most 2 begun per env) counted 2 of env 0's and 8 long ones; the plan counts env
    0's one (10 // 8) and every other env's, envs 6 and 7 twice."""
    played = evaluate_episodes(
        _zeros, "tests.test_evaluate:make_uneven", 10, device=torch.device("cpu"), seed=0
    )
    assert sorted(played.scores) == [SHORT] + [LONG] * 9
    assert played.steps == 2 * LONG * 8


def test_more_envs_than_episodes_count_exactly_the_episodes_asked():
    """3 episodes on 8 envs: envs 0-4 get none (env 0's short ones are never counted)."""
    played = evaluate_episodes(
        _zeros, "tests.test_evaluate:make_uneven", 3, device=torch.device("cpu"), seed=0, num_envs=8
    )
    assert played.scores == [LONG] * 3


def test_a_play_that_runs_out_of_steps_says_how_many_episodes_ended():
    """80 steps on 8 envs: env 0 ends its short episodes, no long one ends. The one score
    counted is env 0's, and the note says 1 of 10 instead of passing it off as the mean."""
    played = evaluate_episodes(
        _zeros,
        "tests.test_evaluate:make_uneven",
        10,
        device=torch.device("cpu"),
        seed=0,
        max_steps=80,
    )
    assert played.scores == [SHORT] and played.asked == 10
    assert "only 1 of 10 episodes ended in the 80 steps" in played.note()
    assert played.note().startswith(" (") and played.note().endswith(")")


def test_a_whole_play_has_nothing_to_remark():
    played = evaluate_episodes(
        _zeros, "tests.test_evaluate:make_uneven", 8, device=torch.device("cpu"), seed=0
    )
    assert len(played.scores) == 8 and played.note() == "" and played.remarks() == ""
