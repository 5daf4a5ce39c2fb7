"""Helpers for the replay tests: a chi-square bound without scipy, and a fake vector env."""

from __future__ import annotations

import math

import numpy as np


def chi2_critical(df: int, z: float = 3.719) -> float:
    """Upper quantile of chi^2(df) by Wilson-Hilferty; z = 3.719 is p = 1e-4."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + z * math.sqrt(a)) ** 3


def chi2_stat(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


class CountingEnv:
    """Vector observations ``[stream, step_id]`` with random rewards and episode ends:
    every transition is identifiable from its observation."""

    def __init__(self, num_envs: int, seed: int, p_term: float = 0.05, p_trunc: float = 0.03):
        self.n, self.rng = num_envs, np.random.default_rng(seed)
        self.p_term, self.p_trunc = p_term, p_trunc
        self.next_id = 0
        self.obs = self._fresh(np.ones(num_envs, dtype=bool), np.zeros((num_envs, 2), np.float32))

    def _fresh(self, mask, obs):
        obs = obs.copy()
        for s in np.flatnonzero(mask):
            obs[s] = (s, self.next_id)
            self.next_id += 1
        return obs

    def step(self):
        reward = self.rng.normal(size=self.n).astype(np.float32)
        terminated = self.rng.random(self.n) < self.p_term
        truncated = ~terminated & (self.rng.random(self.n) < self.p_trunc)
        done = terminated | truncated
        nxt = self._fresh(np.ones(self.n, dtype=bool), self.obs)
        final = nxt.copy()
        reset = self._fresh(done, nxt)
        obs, self.obs = self.obs, reset
        actions = self.rng.integers(0, 4, self.n)
        return obs, actions, reward, terminated, truncated, done, final, reset
