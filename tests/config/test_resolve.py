"""The layering of a run's settings (rlamd.config.layers) and what --help says about it."""

from __future__ import annotations

import re

import pytest

from rlamd.algos import ALGORITHMS
from rlamd.config import ConfigError, to_toml
from rlamd.config.layers import resolve
from rlamd.train import build_parser, main

PRESET_CASES = [
    (algo, env) for algo in ALGORITHMS for env in ("breakout", "cartpole", "acrobot", "Pendulum-v1")
]


@pytest.mark.parametrize(("algo", "env"), PRESET_CASES)
def test_a_saved_config_reproduces_the_same_run_config(tmp_path, algo, env):
    """Every preset, and settings a preset also sets, round-trip through config.toml
    (None included: written as "none", so the preset's value cannot creep back in)."""
    sets = ["dqn.buffer_size=auto", "ppo.target_kl=none", "train.threads=1"]
    try:
        cfg = resolve({"train": {"env": env, "algo": algo}}, sets=sets)
    except ConfigError as exc:  # an algorithm that refuses this env's actions (sac: Discrete)
        if not str(exc).startswith(f"train.algo={algo!r} ({env} has "):
            raise
        pytest.skip(str(exc))
    path = tmp_path / "config.toml"
    path.write_text(to_toml(cfg.sections()))
    assert resolve({}, config_file=str(path)) == cfg
    assert cfg.dqn.buffer_size is None  # the classic preset's 50,000 did not win


def test_the_config_file_names_the_env_and_algorithm_and_later_layers_win(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[train]\nenv = "cartpole"\nalgo = "ppo"\nsteps = 3000\n')
    cfg = resolve({"train": {"steps": 4096}}, config_file=str(path), sets=["ppo.lr=1e-3"])
    assert (cfg.train.env, cfg.train.algo, cfg.train.steps) == ("cartpole", "ppo", 4096)
    assert cfg.ppo.lr == 1e-3
    assert cfg.ppo.clip_coef == ALGORITHMS["ppo"].presets["classic"]["ppo"]["clip_coef"]
    cfg = resolve({"train": {"env": "breakout"}}, config_file=str(path))
    assert cfg.ppo.clip_coef == 0.1  # the flag's env chose the Atari preset


def test_a_bad_key_or_value_in_the_config_file_names_the_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[train]\nenv = "cartpole"\n[ppo]\nnum_step = 64\n')
    with pytest.raises(ConfigError) as got:
        resolve({}, config_file=str(path))
    assert str(got.value).startswith(f"--config {path}: ppo.num_step=64 (no such setting)")
    assert str(got.value).endswith("Did you mean ppo.num_steps?")
    path.write_text('[train]\nenv = "cartpole"\nsteps = "many"\n')
    with pytest.raises(ConfigError, match=rf"^--config {re.escape(str(path))}: train.steps='many'"):
        resolve({}, config_file=str(path))
    # the same mistake given with --set names --set's item, as before
    with pytest.raises(ConfigError, match=r"^ppo.num_step='64' \(no such setting\)"):
        resolve({"train": {"env": "cartpole"}}, sets=["ppo.num_step=64"])


def test_no_env_anywhere_is_one_line(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[dqn]\nlr = 0.001\n")
    with pytest.raises(ConfigError, match="no environment given; accepted: an env name"):
        resolve({}, config_file=str(path))


def test_config_file_alone_trains(tmp_path, capsys):
    """Regression: `--config RUN/config.toml` stopped with 'give an environment'."""
    logdir = tmp_path / "runs"
    args = ["cartpole", "--algo", "ppo", "--steps", "600", "--eval-every", "0"]
    args += ["--run-name", "first", "--logdir", str(logdir), "--no-tensorboard"]
    assert main(args) == 0
    saved = logdir / "first" / "config.toml"
    assert main(["--config", str(saved), "--run-name", "second", "--logdir", str(logdir)]) == 0
    out = "".join(capsys.readouterr())
    assert (logdir / "second" / "checkpoint.pt").is_file(), out
    assert "whole rollouts of 512 steps: the run takes 1,024 steps" in out


def test_help_tells_the_truth():
    text = build_parser().format_help()
    flat = " ".join(text.split())
    assert not re.search(r"\(default: [^)]*\)\.? \(default:", flat)  # never twice
    assert "setup.sh --ray" in flat and "pip install -e .[ray]" not in flat
    assert "acrobot" in flat and "mountaincar" in flat
    assert "default: breakout" not in flat


def test_a_bare_key_several_algorithms_have_is_the_runs_algorithms(capsys):
    from rlamd.api import _layers

    assert resolve({"train": {"env": "cartpole", "algo": "ppo"}}, sets=["lr=1e-3"]).ppo.lr == 1e-3
    named_later = resolve({"train": {"env": "Pendulum-v1"}}, sets=["hidden=8", "algo=td3"])
    assert named_later.td3.hidden == (8,)
    assert resolve({"train": {"env": "cartpole"}}, sets=["hidden=8"]).dqn.hidden == (8,)
    saved = resolve({"train": {"env": "Pendulum-v1", "algo": "sac"}}).to_dict()
    assert resolve({}, saved=saved, sets=["batch_size=64"]).sac.batch_size == 64  # on resume
    fit = resolve(_layers({"gamma": 0.9}, {"env": "Pendulum-v1", "algo": "sac"}))
    assert fit.sac.gamma == 0.9
    named_in_settings = resolve(_layers({"algo": "sac", "lr": 1e-3}, {"env": "Pendulum-v1"}))
    assert named_in_settings.sac.lr == 1e-3 and named_in_settings.ppo.lr != 1e-3
    with pytest.raises(ConfigError, match=r"atari, env all have 'frame_stack'; say which"):
        resolve({"train": {"env": "breakout"}}, sets=["frame_stack=2"])  # not algorithms
    with pytest.raises(ConfigError, match=r"^train\.algo='ppoo'; .*Did you mean 'ppo'\?$"):
        resolve({"train": {"env": "cartpole"}}, sets=["algo=ppoo", "lr=1e-3"])
    assert "ignored" not in capsys.readouterr().err


def test_another_algorithms_setting_is_said_to_do_nothing(capsys):
    from rlamd.api import _layers

    cfg = resolve({"train": {"env": "Pendulum-v1", "algo": "sac"}}, sets=["td3.lr=1e-3"])
    assert cfg.sac.lr != 1e-3
    assert capsys.readouterr().err == (
        "rlamd: note: --set: td3.lr ignored: this run trains sac, which reads only its own "
        "sac.* settings\n"
    )
    resolve(_layers({"dqn.lr": 1e-3, "sac.lr": 1e-3}, {"env": "Pendulum-v1", "algo": "sac"}))
    assert "settings: dqn.lr ignored: this run trains sac" in capsys.readouterr().err
