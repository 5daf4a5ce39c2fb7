"""What an off-policy run learns from: its replay holds exactly the transitions a plain
gymnasium loop makes with the same actions (observation, action, reward, the observation to
bootstrap from, the final one where a time limit cut the episode, and a discount of 0 only
at a termination), each once, and nothing else."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlamd.algos import build_agent, get_algorithm
from rlamd.collector import Collector
from rlamd.config.sections import RunConfig
from rlamd.envs import make_env

GAMMA = 0.99


def _plain(name: str, seed: int, actions: list[np.ndarray]) -> list[tuple]:
    """``(obs, action, reward, next obs, discount)`` of one gymnasium env played with
    ``actions``, reset with ``seed`` once, then unseeded after each episode."""
    env = gym.make(name)
    obs, _ = env.reset(seed=seed)
    out = []
    for a in actions:
        nxt, r, terminated, truncated, _ = env.step(a)
        out.append((obs, a, r, nxt, 0.0 if terminated else GAMMA))
        obs = env.reset()[0] if terminated or truncated else nxt
    env.close()
    return out


def _run(name: str, algo: str, steps: int, num_envs: int, seed: int):
    """The loop of ``rlamd.train NAME --algo ALGO`` before learning starts (uniformly
    random actions), ``steps`` vector steps; returns it and the actions it took."""
    cfg = RunConfig.from_dict(
        {
            "train": {"env": name, "algo": algo, "num_envs": num_envs, "device": "cpu"},
            algo: {"buffer_size": 4 * steps * num_envs, "learning_starts": 10**9, "gamma": GAMMA},
        }
    )
    cpu = torch.device("cpu")
    env = make_env(name, num_envs=num_envs)
    agent = build_agent(cfg, cpu, env)
    loop = get_algorithm(algo).local_loop(cfg, Collector(env, cpu, seed), agent, 0, print)
    taken = [loop.iterate()[0].actions.copy() for _ in range(steps)]
    return loop, np.stack(taken)


@pytest.mark.parametrize(
    ("name", "algo", "steps", "ends"),
    [("Pendulum-v1", "td3", 450, "truncated"), ("Hopper-v5", "sac", 300, "terminated")],
)
def test_the_replay_holds_the_transitions_a_plain_gymnasium_loop_makes(name, algo, steps, ends):
    if name.startswith("Hopper"):
        pytest.importorskip("mujoco")
    seed, num_envs = 7, 2
    loop, taken = _run(name, algo, steps, num_envs, seed)
    buffer = loop.buffer
    st = buffer.storage
    idx = torch.from_numpy(st.active_indices())
    win = st.window(idx)
    stored = {
        "obs": st.stacks(idx).numpy(),
        "action": st.read_actions(idx).numpy(),
        "reward": win.returns.numpy(),
        "next": st.stacks(win.next_index).numpy(),
        "discount": win.discounts.numpy(),
    }
    expected = [t for i in range(num_envs) for t in _plain(name, seed + i, list(taken[:, i]))]
    # every transition but each env's last (its next observation is not stored yet)
    assert len(idx) == len(expected) - num_envs
    discounts = np.array([t[4] for t in expected])
    if ends == "terminated":
        assert (discounts == 0).sum() >= 4  # random Hopper falls every few dozen steps
    else:
        assert (discounts == 0).sum() == 0  # Pendulum only ends at its 200-step limit
    # match stored records to plain transitions by observation and action (float32)
    key = {(t[0].astype(np.float32).tobytes(), np.float32(t[1]).tobytes()): t for t in expected}
    for j in range(len(idx)):
        k = (stored["obs"][j].tobytes(), stored["action"][j].tobytes())
        assert k in key, f"record {int(idx[j])} is no transition of the plain loop"
        _, _, r, nxt, discount = key.pop(k)
        assert stored["reward"][j] == pytest.approx(r, rel=1e-6, abs=1e-6)
        np.testing.assert_allclose(stored["next"][j], nxt.astype(np.float32), rtol=1e-6)
        assert stored["discount"][j] == pytest.approx(discount)
    assert len(key) == num_envs  # only the newest transition of each env is left
    loop.collector.close()
