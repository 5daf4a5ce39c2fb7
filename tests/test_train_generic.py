"""The command line on envs rlamd does not name itself: a user's module, entry points,
continuous actions, evaluation with and without video, and PPO learning Pendulum-v1."""

from __future__ import annotations

import json

import pytest
import torch

from rlamd.evaluate import main as evaluate
from rlamd.train import main

MODULE = "tests.envs.custom_envs"


def _common(tmp_path, name):
    return ["--logdir", str(tmp_path), "--run-name", name, "--no-tensorboard", "--device", "cpu"]


def test_a_users_env_from_their_module_trains_and_evaluates(tmp_path, capsys):
    args = ["RlamdTest/Corridor-v0", "--env-module", MODULE, "--algo", "ppo", "--steps", "1024"]
    assert (
        main([*args, "--eval-every", "512", "--set", "ppo.num_steps=64", *_common(tmp_path, "c")])
        == 0
    )
    ck = torch.load(tmp_path / "c" / "checkpoint.pt", weights_only=True)
    assert ck["config"]["train"]["env_module"] == MODULE and ck["step"] == 1024
    assert "RlamdTest/Corridor-v0" in (tmp_path / "c" / "config.toml").read_text()
    assert (tmp_path / "c" / "evals.csv").read_text().count("\n") >= 2
    machine = json.loads((tmp_path / "c" / "device.json").read_text())  # what it ran on
    assert machine["device"]["device"] == "cpu" and machine["torch"] == torch.__version__
    assert machine["python"].count(".") == 2 and machine["cpu_count"] >= 1
    capsys.readouterr()
    assert evaluate(["c", "--logdir", str(tmp_path), "--episodes", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["episodes"] == 3 and result["env"] == "RlamdTest/Corridor-v0"


def test_continuous_ppo_resumes_with_its_normalisers(tmp_path, capsys):
    args = [f"{MODULE}:make_reach", "--algo", "ppo", "--steps", "1024", "--num-envs", "2"]
    fast = ["--set", "ppo.update_epochs=2", "--set", "ppo.num_minibatches=4"]
    extra = ["--set", "ppo.num_steps=128", "--eval-every", "0", "--checkpoint-every", "512"]
    assert main(args + extra + fast + _common(tmp_path, "r")) == 0
    first = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert first["config"]["ppo"]["norm_obs"] and first["config"]["ppo"]["norm_reward"]
    assert first["agent"]["net"]["obs_norm.count"] == 1024
    assert "reward_scaler" in first and first["agent"]["net"]["log_std"].shape == (2,)
    assert main(["--resume", str(tmp_path / "r"), "--steps", "2048", *extra[2:]]) == 0
    final = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert final["agent"]["net"]["obs_norm.count"] == 2048
    assert final["reward_scaler"]["moments"][2] > first["reward_scaler"]["moments"][2]


def test_dqn_refuses_continuous_actions_in_one_line(tmp_path, capsys):
    assert main(["Pendulum-v1", "--logdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "train.algo='dqn' (Pendulum-v1 has continuous actions, Box(-2.0, 2.0, (1,)" in err
    assert err.count("\n") == 1 and not any(tmp_path.iterdir())


def test_video_is_written_where_the_env_renders_and_refused_where_it_cannot(tmp_path, capsys):
    common = ["--algo", "ppo", "--steps", "256", "--eval-every", "0", "--num-envs", "2"]
    short = ["--set", "ppo.num_steps=128", "--set", "ppo.update_epochs=1"]
    assert main([f"{MODULE}:make_reach", *common, *short, *_common(tmp_path, "v")]) == 0
    out = tmp_path / "gifs"
    assert evaluate([str(tmp_path / "v"), "--episodes", "2", "--video", str(out)]) == 0
    gifs = sorted(out.glob("*.gif"))
    assert [g.name for g in gifs] == ["episode_000.gif"]  # env 0 plays one of the two
    from PIL import Image

    with Image.open(gifs[0]) as gif:
        assert gif.n_frames == 51 and gif.size == (64, 48)
    assert main([f"{MODULE}:make_corridor", *common, *short, *_common(tmp_path, "n")]) == 0
    capsys.readouterr()
    none = tmp_path / "none"
    assert evaluate([str(tmp_path / "n"), "--episodes", "2", "--video", str(none)]) == 2
    err = capsys.readouterr().err
    assert "cannot draw frames" in err and "render_mode=None" in err and not none.exists()


@pytest.mark.slow
def test_ppo_learns_pendulum_as_rl_zoo_reports(tmp_path, capsys):
    """Pendulum-v1, 100k env steps with RL Zoo's PPO hyperparameters (hyperparams/ppo.yml:
    4 envs x 1024 steps, 10 epochs, minibatches of 64, lr 1e-3, gamma 0.9, lambda 0.95,
    clip 0.2; its gSDE exploration is not implemented, the continuous preset's observation
    and reward normalisation stand in for it). RL Zoo's benchmark (benchmark.md) reports
    -172.2 +/- 104.2 for PPO after 100k steps (deterministic policy, 750 episodes); random
    play scores about -1,200. One run of ours in six (in ten with earlier ones) ended below
    -400 (-659), so one seed would fail about that often: here seeds 1-3, each scored over
    20 episodes, the median >= -400 and each >= -900 (about 70 s a seed on this 2-core
    CPU)."""
    zoo = [
        "ppo.num_steps=1024",
        "ppo.num_minibatches=64",
        "ppo.update_epochs=10",
        "ppo.lr=1e-3",
        "ppo.gamma=0.9",
        "ppo.gae_lambda=0.95",
    ]
    args = ["Pendulum-v1", "--algo", "ppo", "--steps", "102400", "--num-envs", "4"]
    sets = [x for s in zoo for x in ("--set", s)]
    means = []
    for seed in (1, 2, 3):
        name = f"pend{seed}"
        run = args + sets + ["--eval-every", "0", "--seed", str(seed)]
        assert main(run + _common(tmp_path, name)) == 0
        capsys.readouterr()
        assert evaluate([name, "--logdir", str(tmp_path), "--episodes", "20", "--json"]) == 0
        means.append(json.loads(capsys.readouterr().out)["mean"])
    assert sorted(means)[1] >= -400 and min(means) >= -900, means
