"""The Python API: ``rlamd.fit`` trains through the runner, ``rlamd.load`` gives a policy
that acts in the env's own terms, and ``import rlamd`` stays light."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import rlamd
from rlamd.config import ConfigError
from tests.envs import custom_envs as ce

SHORT = {"train.eval_episodes": 2, "train.eval_every": 0, "train.tensorboard": False}
FAST = {"ppo.num_minibatches": 4, "ppo.update_epochs": 2}


def test_import_rlamd_loads_no_upper_layer_until_fit_is_used():
    code = (
        "import sys, rlamd; print('rlamd.api' in sys.modules, 'rlamd.runner' in sys.modules); "
        "f = rlamd.fit; print(f.__module__, 'rlamd.runner' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "rlamd.api", "True"]
    with pytest.raises(AttributeError, match="no attribute 'fitt'"):
        _ = rlamd.fitt


def _fit_reach(steps: int, **kwargs):
    """PPO on the reach factory (Box actions), two envs, short rollouts."""
    settings = {**SHORT, **FAST, "ppo.num_steps": 64, "num_envs": 2}
    return rlamd.fit(ce.make_reach, algo="ppo", steps=steps, settings=settings, **kwargs)


def test_fit_a_factory_then_load_and_act_in_the_envs_own_terms(tmp_path):
    """A module-level factory with Box actions (uneven bounds): fit runs the CLI's runner
    (run folder, checkpoint, final evaluation); load's policy takes the env's raw
    observations and returns actions inside the Box, deterministic by default."""
    run = _fit_reach(512, logdir=tmp_path, run_name="reach")
    assert run.status == 0 and run.run_dir == tmp_path / "reach"
    assert (run.run_dir / "checkpoint.pt").is_file() and (run.run_dir / "config.toml").is_file()
    assert run.config.train.env == "tests.envs.custom_envs:make_reach"
    assert run.config.ppo.norm_obs and run.config.ppo.norm_reward  # the continuous preset
    assert len(run.final_eval.scores) == 2
    assert run.final_eval.mean == pytest.approx(np.mean(run.final_eval.scores))
    policy = rlamd.load(run.run_dir)
    env = ce.make_reach()
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        action = policy.act(obs)
        assert action.shape == (2,) and action.dtype == np.float32
        assert env.action_space.contains(action)
        np.testing.assert_array_equal(policy.act(obs), action)  # deterministic
        obs, *_ = env.step(action)


def test_fit_an_id_from_a_module_with_offset_discrete_actions(tmp_path):
    run = rlamd.fit(
        ce.ENV_ID,
        algo="dqn",
        steps=400,
        settings={**SHORT, "dqn.learning_starts": 100, "dqn.buffer_size": 1000},
        env_module="tests.envs.custom_envs",
        logdir=tmp_path,
        run_name="corridor",
    )
    assert run.status == 0 and run.final_eval is not None
    policy = rlamd.load(tmp_path / "corridor")
    obs, _info = ce.Corridor().reset(seed=1)
    assert policy.act(obs) in (-1, 0, 1)  # Discrete(3, start=-1)


def test_fit_refuses_bad_settings_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match=r"Did you mean ppo.lr"):
        rlamd.fit("cartpole", settings={"ppo.lrr": 1e-3}, logdir=tmp_path)
    with pytest.raises(ConfigError, match=r"no section 'ppoo'"):
        rlamd.fit("cartpole", settings={"ppoo.lr": 1e-3}, logdir=tmp_path)
    with pytest.raises(ConfigError, match=r"train.algo='dqn' \(Pendulum-v1 has continuous"):
        rlamd.fit("Pendulum-v1", algo="dqn", logdir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_a_lambda_env_loads_elsewhere_only_when_given_again(tmp_path):
    run = rlamd.fit(
        lambda: gym.wrappers.TimeLimit(ce.Corridor(), 30),
        steps=256,
        settings={**SHORT, "ppo.num_steps": 64, "ppo.num_minibatches": 2, "num_envs": 4},
        logdir=tmp_path,
        run_name="lam",
    )
    assert run.config.train.env.startswith("tests.test_api:")
    code = (
        "import rlamd, sys\n"
        "try:\n    rlamd.load(sys.argv[1])\nexcept ValueError as e:\n    print(e)\n"
        "from tests.envs.custom_envs import Corridor\n"
        "p = rlamd.load(sys.argv[1], env=Corridor)\n"
        "print(p.act(Corridor().reset(seed=0)[0]))\n"
        "from rlamd.evaluate import main\n"
        "print('rc', main([sys.argv[1]]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(run.run_dir)], capture_output=True, text=True
    )
    lines = out.stdout.strip().splitlines()
    assert "pass it: rlamd.load(run, env=...)" in lines[0], out.stderr
    assert lines[1] in ("-1", "0", "1")
    # the command line says the run trained on a lambda, and how to load it
    assert lines[2] == "rc 2" and "Unknown environment" not in out.stderr
    assert "a lambda, a local function" in out.stderr
    assert "rlamd.load(RUN, env=<the same callable>)" in out.stderr


def test_fit_refuses_an_env_instance_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"env=TimeLimit object; accepted: an env id"):
        rlamd.fit(gym.wrappers.TimeLimit(ce.Corridor(), 10), logdir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_fit_takes_a_section_as_a_mapping_as_its_toml_table_would(tmp_path):
    """Regression: settings={"train": {...}} was refused as ``train='0' (no such setting)``."""
    from rlamd.api import _layers

    got = _layers({"ppo": {"lr": 1e-3}, "train": {"threads": 1}, "dqn.lr": 2e-4}, {"env": "x"})
    assert got == {"train": {"env": "x", "threads": 1}, "ppo": {"lr": 1e-3}, "dqn": {"lr": 2e-4}}
    with pytest.raises(ConfigError, match=r"Did you mean ppo.lr"):
        rlamd.fit("cartpole", settings={"ppo": {"lrr": 1e-3}}, logdir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_fit_refuses_settings_that_are_not_a_mapping(tmp_path):
    """Regression: settings=[...] was an AttributeError."""
    with pytest.raises(ConfigError, match=r"settings=list .*accepted: a mapping"):
        rlamd.fit("cartpole", settings=["ppo.lr=1e-3"], logdir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_policy_act_checks_the_observation_against_the_space(tmp_path):
    """Regression: a batch, an (obs, info) tuple or another shape gave torch's or numpy's
    error; a (2, 2) observation for a 4-vector was taken; a NaN one returned NaN."""
    run = rlamd.fit(
        "CartPole-v1",
        steps=64,
        settings={**SHORT, "ppo.num_steps": 32, "ppo.num_minibatches": 2, "num_envs": 2},
        logdir=tmp_path,
        run_name="cp",
    )
    policy = rlamd.load(run.run_dir)
    obs, info = gym.make("CartPole-v1").reset(seed=0)
    assert policy.act(obs) in (0, 1)
    takes = "accepted: one observation of the env's observation_space Box("
    cases = [
        ((obs, info), "an (observation, info) tuple"),
        (np.stack([obs, obs, obs]), "a batch of 3 observations"),
        (obs.reshape(2, 2), "shape (2, 2)"),
        (np.full(4, np.nan, np.float32), "holding NaN or inf"),
        (obs[:3], "shape (3,)"),
    ]
    for bad, said in cases:
        with pytest.raises(ValueError) as err:
            policy.act(bad)
        assert said in str(err.value) and takes in str(err.value)


def test_a_final_evaluation_in_which_no_episode_ends_says_so(tmp_path, monkeypatch):
    """The final evaluation stops at its step limit (here 4 steps) before an episode ends:
    fit returns NaN scores and says why, where it used to raise StatisticsError."""
    import rlamd.api
    import rlamd.evaluate

    def short_play(*args, **kwargs):
        return rlamd.evaluate.evaluate_episodes(*args, **kwargs, max_steps=4)

    monkeypatch.setattr(rlamd.api, "evaluate_episodes", short_play)
    run = _fit_reach(256, logdir=tmp_path)
    assert run.status == 0 and run.final_eval.scores == ()
    assert np.isnan(run.final_eval.mean) and np.isnan(run.final_eval.std)
    assert run.final_eval.note.startswith("only 0 of 2 episodes ended in the 4 steps")
