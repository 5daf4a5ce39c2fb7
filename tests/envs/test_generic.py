"""Any gymnasium env: names, spaces, conversions, vector modes, rendering and checks."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

from rlamd.envs import (
    EnvConfig,
    UnsupportedSpace,
    env_family,
    make_env,
    parse_env_id,
    probe_env,
    register_factory,
    render_problem,
)
from tests.envs import custom_envs as ce

MODULE = "tests.envs.custom_envs"


@pytest.mark.parametrize(
    ("name", "family", "game"),
    [
        ("Pendulum-v1", "gym", "Pendulum-v1"),
        ("pendulum-v1", "gym", "Pendulum-v1"),
        ("Blackjack-v1", "gym", "Blackjack-v1"),  # gymnasium's, not ALE's Blackjack ROM
        ("MountainCarContinuous-v0", "gym", "MountainCarContinuous-v0"),
        ("cartpole", "classic", "CartPole-v1"),
        ("breakout", "atari", "breakout"),
        ("ALE/Pong-v5", "atari", "pong"),
        (f"{MODULE}:make_corridor", "gym", f"{MODULE}:make_corridor"),
        (ce.ENV_ID, "gym", ce.ENV_ID),
    ],
)
def test_names_reach_their_family(name, family, game):
    parsed = parse_env_id(name, MODULE)
    assert (parsed.family, parsed.game) == (family, game)


def test_an_env_module_is_imported_before_the_name_is_read():
    assert parse_env_id("RlamdTest/Pixels-v0", "tests.envs.custom_envs").slug == (
        "rlamdtest_pixels-v0"
    )
    with pytest.raises(ValueError, match=r"train.env_module='no_such_mod_xyz': importing"):
        parse_env_id("Pendulum-v1", "no_such_mod_xyz")


def test_unknown_names_still_list_the_closest():
    with pytest.raises(ValueError, match="Closest valid names: Pendulum-v1") as err:
        parse_env_id("Pendulumm-v1")
    assert "any id in gymnasium's registry" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="Closest valid names: breakout"):
        parse_env_id("breakuot")


def test_families_choose_presets():
    assert env_family("Pendulum-v1") == "continuous"
    assert env_family("FrozenLake-v1") == "classic"
    assert env_family(ce.IMAGE_ID, MODULE) == "pixels"
    assert env_family("cartpole") == "classic" and env_family("breakout") == "atari"


def test_hidden_env_shapes_offset_actions_and_time_limit():
    """float64 obs with +-inf bounds -> float32; Discrete(3, start=-1) -> agent indices 0..2
    (the env's assert sees -1..1); the registry's TimeLimit truncates at 40 steps."""
    env = make_env(ce.ENV_ID, num_envs=2, seed=0, module=MODULE)
    assert env.single_observation_space.dtype == np.float32 and env.num_actions == 3
    s = None
    for _ in range(40):
        s = env.step(np.array([1, 1]))  # "stay" in the env's terms (index 1 = action 0)
        assert s.obs.dtype == np.float32 and s.obs.shape == (2, 2)
        assert not s.terminated.any()
    assert s.truncated.all() and s.done.all()  # cut by the registered limit
    while not s.terminated[0]:
        s = env.step(np.array([2, 0]))  # right / left (never below 0)
    length = s.episode_length[0]
    assert length in (4, 5) and s.episode_return[0] == pytest.approx(1.0 - 0.01 * (length - 1))
    env.close()


def test_continuous_actions_are_clipped_to_uneven_bounds_and_reshaped():
    env = make_env(ce.CONTINUOUS_ID, num_envs=3, seed=0, module=MODULE)
    assert env.continuous and env.actions.size == 2 and env.actions.shape == (2,)
    with pytest.raises(TypeError, match="continuous actions"):
        _ = env.num_actions
    wild = np.array([[9.0, -9.0], [-9.0, 9.0], [0.5, 0.1]], dtype=np.float32)
    s = env.step(wild)  # the env asserts its action space contains what it gets
    np.testing.assert_array_equal(s.actions, wild)  # reported unclipped
    np.testing.assert_array_equal(env._to_env, np.float32([[3, 0], [-1, 0.5], [0.5, 0.1]]))
    env.close()


def test_images_become_channels_first_with_grayscale_resize_and_stack():
    env = make_env(ce.IMAGE_ID, num_envs=2, seed=0, module=MODULE)
    assert env.single_observation_space.shape == (3, 40, 48) and env.frame_stack == 1
    env.close()
    cfg = EnvConfig(grayscale=True, resize=36, frame_stack=4)
    env = make_env(ce.IMAGE_ID, num_envs=2, seed=0, module=MODULE, env_cfg=cfg)
    obs = env.reset(seed=0)
    assert obs.shape == (2, 4, 36, 36) and obs.dtype == np.uint8 and env.frame_stack == 4
    assert (obs[:, :3] == 0).all() and obs[:, 3].any()  # zeros before the first frame
    s = env.step(np.zeros(2, dtype=np.int64))
    np.testing.assert_array_equal(s.obs[:, 2], obs[:, 3])  # the stack moved by one frame
    env.close()
    rgb = make_env(ce.IMAGE_ID, 1, module=MODULE, env_cfg=EnvConfig(frame_stack=2, resize=36))
    assert rgb.single_observation_space.shape == (6, 36, 36) and rgb.frame_stack == 1
    rgb.close()


def test_unsupported_spaces_are_refused_in_one_line():
    with pytest.raises(
        UnsupportedSpace, match=r"20x20 pixels are too small .*at least 36x36 .*env.resize=84"
    ):
        make_env(ce.IMAGE_ID, 1, module=MODULE, env_cfg=EnvConfig(resize=20))
    name = register_factory(ce.DictObs)
    with pytest.raises(UnsupportedSpace, match=r"observation space Dict\(.*FlattenObservation"):
        probe_env(name)
    with pytest.raises(ValueError, match=r"could not be made \(DependencyNotInstalled"):
        probe_env("CarRacing-v3")  # box2d is not installed here


def test_async_vector_env_steps_like_the_sync_one():
    sync = make_env("Pendulum-v1", num_envs=2, seed=3)
    multi = make_env("Pendulum-v1", num_envs=2, seed=3, env_cfg=EnvConfig(vector="async"))
    assert multi.can_overlap and not sync.can_overlap
    rng = np.random.default_rng(0)
    for _ in range(210):  # past the 200-step time limit: same-step resets in both
        a = rng.uniform(-2, 2, (2, 1)).astype(np.float32)
        x, y = sync.step(a), multi.step(a)
        np.testing.assert_allclose(x.obs, y.obs)
        np.testing.assert_array_equal(x.done, y.done)
    sync.close()
    multi.close()


def test_env_checker_warnings_are_recorded_not_raised():
    """Under ``-W error`` the checker's warnings (float64 bounds, an observation out of its
    space) must not stop a run: they are notes."""

    class Noisy(ce.Corridor):
        def __init__(self, render_mode=None):
            super().__init__(render_mode)
            self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        probe = probe_env(register_factory(lambda: Noisy()))
        assert any("env checker" in note for note in probe.notes)
        env = make_env(register_factory(lambda: Noisy()), num_envs=2, seed=0)
        env.step(np.array([2, 2]))
        env.close()


def test_render_problems_are_named():
    assert render_problem(ce.CONTINUOUS_ID, MODULE) is None
    assert render_problem(f"{MODULE}:make_reach") is None
    problem = render_problem(f"{MODULE}:make_corridor")
    assert "render_mode=None" in problem and "factory must pass render_mode" in problem


def test_frame_recorder_keeps_whole_episodes_of_env_zero():
    env = make_env(f"{MODULE}:make_reach", num_envs=2, seed=0, render=True)
    for _ in range(120):
        env.step(np.zeros((2, 2), dtype=np.float32))
    episodes = env.recorder.take()
    assert len(episodes) == 2 and all(len(e) == 51 for e in episodes)  # reset + 50 steps
    assert episodes[0][0].shape == (48, 64, 3)
    env.close()


def test_a_replay_rebuilds_stacked_gray_frames_of_a_generic_env():
    """One-channel frames stacked by the env are stored once each by DQN's replay and
    rebuilt at sample time: every sampled observation is one the env returned."""
    import torch

    from rlamd.agents.dqn import DQNConfig
    from rlamd.algos.dqn_replay import build_replay

    cfg = EnvConfig(grayscale=True, resize=36, frame_stack=3)
    env = make_env(ce.IMAGE_ID, num_envs=2, seed=0, module=MODULE, env_cfg=cfg)
    replay = build_replay(DQNConfig(buffer_size=400, n_step=1), env, torch.device("cpu"), 0)
    assert replay.storage.frame_stack == 3
    seen, obs = set(), env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(150):
        seen.update(o.tobytes() for o in obs)
        s = env.step(rng.integers(0, 2, 2))
        replay.add(obs, s.actions, s.reward, s.terminated, s.done, s.final_obs)
        seen.update(o.tobytes() for o in s.final_obs)
        obs = s.obs
    batch = replay.sample(64, beta=0.4)
    for o in torch.cat([batch.obs, batch.next_obs]).numpy():
        assert o.tobytes() in seen
    env.close()
