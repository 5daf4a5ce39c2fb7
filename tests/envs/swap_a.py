"""Registers ``RlamdSwap/Walk-v0`` with (2,) observations; :mod:`tests.envs.swap_b`
registers the same id with (3,) observations (a resume with another ``--env-module``)."""

from __future__ import annotations

import gymnasium as gym

from tests.envs.faulty_envs import Walk

gym.register("RlamdSwap/Walk-v0", entry_point=Walk)
