from __future__ import annotations

import numpy as np

from rlamd.envs import make_env


def test_cartpole_vector_observations_and_episode_stats():
    env = make_env("cartpole", num_envs=4, seed=0)
    assert env.num_actions == 2
    rng = np.random.default_rng(0)
    lengths = []
    for _ in range(300):
        s = env.step(rng.integers(0, 2, 4))
        assert s.obs.shape == (4, 4) and s.obs.dtype == np.float32
        lengths += list(s.episode_length[s.done])
        # Each finished CartPole episode earns 1 per step.
        np.testing.assert_array_equal(s.episode_return[s.done], s.episode_length[s.done])
        # final_obs differs from the reset observation where an episode ended.
        if s.done.any():
            assert not np.allclose(s.final_obs[s.done], s.obs[s.done])
    assert len(lengths) > 10 and 8 <= np.mean(lengths) <= 60
