"""A user's env that misbehaves: one line naming it, the method and what was wrong, the
checkpoint of the last finished iteration and the resume command (issue 34, cases 3-6).

The envs are in ``tests/envs/faulty_envs.py``; each breaks after ``AFTER`` steps of one
instance, in the middle of a short cartpole-sized run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rlamd.checkpoint import load_checkpoint
from rlamd.envs import EnvFault, EnvHealth, make_env
from rlamd.train import main
from tests.envs import faulty_envs

MODULE = "tests.envs.faulty_envs"
ROOT = Path(__file__).resolve().parents[1]


def _train(tmp_path, env: str, *extra: str, algo: str = "ppo") -> int:
    return main(
        [
            faulty_envs.IDS[env],
            "--env-module",
            MODULE,
            "--algo",
            algo,
            "--steps",
            "3000",
            "--num-envs",
            "2",
            "--checkpoint-every",
            "64",
            "--log-every",
            "64",
            "--eval-every",
            "0",
            "--set",
            "ppo.num_steps=32",
            "--set",
            "dqn.learning_starts=100",
            "--logdir",
            str(tmp_path),
            "--run-name",
            "r",
            "--no-tensorboard",
            *extra,
        ]
    )


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ("StepRaises", "(env 0): step() raised RuntimeError: the simulator lost its connection"),
        (
            "WrongShape",
            "step() returned an observation that is an array float32 of shape (3,); its "
            "observation_space promises Box(-1.0, 1.0, (2,), float32)",
        ),
        ("ArrayReward", "step() returned a reward that is an array float64 of shape (2,)"),
    ],
)
def test_an_env_fault_in_training_is_one_line_with_a_checkpoint_and_the_resume_command(
    tmp_path, capsys, env, said
):
    assert _train(tmp_path, env) == 1
    line = _error_line(capsys.readouterr().err)
    assert faulty_envs.IDS[env] in line and said in line
    run = tmp_path / "r"
    state = load_checkpoint(run / "checkpoint.pt")
    # the checkpoint of the last finished iteration: whole rollouts, before the fault
    assert 0 < state["step"] <= 2 * faulty_envs.AFTER and state["step"] % 64 == 0
    assert f"step {state['step']:,}" in line and f"--resume {run}" in line
    assert "Traceback" in (run / "error.log").read_text()


def test_reset_returning_a_bare_observation_is_refused_before_training(tmp_path, capsys):
    assert _train(tmp_path, "BareReset") == 1
    line = _error_line(capsys.readouterr().err)
    assert "BareReset-v0 (env 0): reset() returned an array float32 of shape (2,)" in line
    assert "accepted: (observation, info)" in line and "before training" in line


def test_debug_prints_the_traceback_behind_the_line(tmp_path, capsys):
    assert _train(tmp_path, "StepRaises", "--debug") == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "the simulator lost its connection" in err


@pytest.mark.parametrize(("env", "algo"), [("NaNReward", "dqn"), ("NaNObs", "ppo")])
def test_non_finite_env_output_is_counted_and_stops_a_run_that_skips_its_updates(
    tmp_path, capsys, env, algo
):
    """Regression: PPO and uniform DQN ended "done" with every update skipped; prioritized
    DQN died with a traceback about priorities that named neither."""
    status = _train(tmp_path, env, "--set", "env.max_skipped_updates=20", algo=algo)
    out, err = capsys.readouterr()
    assert status == 1
    line = _error_line(err)
    assert "env.max_skipped_updates=20" in line and "priorities" not in err
    what = "rewards" if env == "NaNReward" else "observations"
    assert f"{faulty_envs.IDS[env]} returned non-finite {what}" in out and "env 1:" in out
    assert load_checkpoint(tmp_path / "r" / "checkpoint.pt")["step"] > 0


def test_env_health_counts_rows_per_env_index():
    health = EnvHealth(3, "E")
    obs = np.zeros((3, 2), np.float32)
    obs[1, 0] = np.nan
    health.check_obs(obs)
    health.check_obs(obs[[1]], np.array([2]))  # final observations of env 2
    health.check_reward(np.array([np.inf, 0, 0], np.float32))
    health.check_obs(np.full((3, 4), 255, np.uint8))  # images cannot be non-finite
    line = health.take()
    assert "observations in 2 steps (env 1: 1, env 2: 1)" in line
    assert "rewards in 1 steps (env 0: 1)" in line
    assert health.take() is None and (health.total_obs, health.total_reward) == (2, 1)


def test_an_env_exception_names_the_env_index_in_a_vector_env():
    env = make_env(faulty_envs.IDS["StepRaises"], num_envs=2, module=MODULE)
    env.reset(seed=0)
    env.env.envs[1].unwrapped.steps = faulty_envs.AFTER + 1
    with pytest.raises(EnvFault, match=r"StepRaises-v0 \(env 1\): step\(\) raised RuntimeError"):
        env.step(np.zeros(2, np.int64))
    env.close()


@pytest.mark.slow
def test_a_hung_async_step_times_out_naming_the_env(tmp_path, capsys):
    status = _train(
        tmp_path, "HangingStep", "--set", "env.vector=async", "--set", "env.step_timeout=2"
    )
    assert status == 1
    line = _error_line(capsys.readouterr().err)
    assert "HangingStep-v0 (env 0, 1): step() took longer than env.step_timeout=2 s" in line
    assert (tmp_path / "r" / "checkpoint.pt").exists()


def _start_hung_run(tmp_path, vector: str) -> subprocess.Popen:
    args = [
        sys.executable,
        "-m",
        "rlamd.train",
        faulty_envs.IDS["HangingStep"],
        "--env-module",
        MODULE,
        "--algo",
        "ppo",
        "--steps",
        "100000",
        "--logdir",
        str(tmp_path),
        "--run-name",
        "h",
        "--no-tensorboard",
        "--num-envs",
        "2",
        "--checkpoint-every",
        "64",
        "--set",
        "ppo.num_steps=32",
        "--set",
        f"env.vector={vector}",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
@pytest.mark.parametrize("vector", ["sync", "async"])
def test_ctrl_c_on_a_hung_step_says_so_then_stops_with_the_checkpoint(tmp_path, vector):
    """Regression: in the default mode the first Ctrl-C printed nothing; with async envs
    three left the process in AsyncVectorEnv.close."""
    proc = _start_hung_run(tmp_path, vector)
    ckpt = tmp_path / "h" / "checkpoint.pt"
    deadline = time.monotonic() + 120
    while not ckpt.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)  # the envs hang after their AFTER steps
    proc.send_signal(signal.SIGINT)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert "stopping with a checkpoint after this iteration" in err
    assert proc.returncode == 130, err
    assert "stopped by signal 2" in out and "Resume with:" in out
    assert "Traceback" not in err
    assert load_checkpoint(ckpt)["step"] > 0


def test_a_finished_run_has_no_error_log(tmp_path):
    status = main(
        [
            "cartpole",
            "--algo",
            "ppo",
            "--steps",
            "256",
            "--set",
            "ppo.num_steps=32",
            "--logdir",
            str(tmp_path),
            "--run-name",
            "ok",
            "--no-tensorboard",
        ]
    )
    assert status == 0 and not (tmp_path / "ok" / "error.log").exists()
    assert torch.is_tensor(load_checkpoint(tmp_path / "ok" / "checkpoint.pt")["torch_rng"])


def test_an_env_that_never_ends_is_checkpointed_before_its_capped_evaluation(
    tmp_path, capsys, monkeypatch
):
    """Regression: the first evaluation of an env without an end played 2M steps into a
    ZeroDivisionError, before the checkpoint due at the same step was written."""
    import rlamd.runner as runner

    real, seen = runner.evaluate_episodes, []

    def evaluate(*args, **kwargs):
        seen.append(load_checkpoint(tmp_path / "r" / "checkpoint.pt")["step"])
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "evaluate_episodes", evaluate)
    status = _train(
        tmp_path,
        "NeverEnds",
        "--eval-every",
        "128",
        "--eval-episodes",
        "2",
        "--steps",
        "128",
        "--set",
        "env.eval_max_steps=40",
    )
    out = capsys.readouterr().out
    assert status == 0 and seen == [128]
    assert re.search(r"eval at 128: [\d.]+ \+/- [\d.]+ over 2 games \(2 cut at 40 steps", out)


def test_evaluation_caps_episodes_only_where_the_env_sets_no_limit():
    from rlamd.envs import EnvConfig
    from rlamd.evaluate import EVAL_MAX_STEPS, _cap

    assert _cap(faulty_envs.IDS["NeverEnds"], MODULE, None) == EVAL_MAX_STEPS
    assert _cap("CartPole-v1", None, None) is None  # its own limit, 500
    assert _cap("CartPole-v1", None, EnvConfig(eval_max_steps=9)) == 9
    assert _cap(faulty_envs.IDS["NeverEnds"], MODULE, EnvConfig(max_episode_steps=7)) is None


def test_an_evaluation_with_no_finished_episode_says_so(tmp_path, capsys):
    from rlamd.logger import RunLogger

    logger = RunLogger(tmp_path, 100, 0, tensorboard=False, progress=False)
    logger.evaluation(50, [])
    logger.close()
    assert "eval at 50: no evaluation episode finished" in capsys.readouterr().out
    assert (tmp_path / "evals.csv").read_text() == "step,mean,std,episodes\n"


def test_rlamd_evaluate_says_how_far_a_long_evaluation_is(tmp_path, capsys, monkeypatch):
    import rlamd.evaluate as evaluate

    assert _train(tmp_path, "NeverEnds", "--steps", "64", "--set", "env.eval_max_steps=30") == 0
    capsys.readouterr()
    monkeypatch.setattr(evaluate, "PROGRESS_EVERY_S", 0.0)
    run = str(tmp_path / "r")
    assert evaluate.main([run, "--episodes", "2", "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    assert "rlamd: evaluating: 0 of 2 episodes done" in err
    assert "2 episodes" in out and "2 cut at 30 steps without an end" in out


def test_a_resume_whose_new_env_module_registers_the_id_anew_is_refused_naming_the_spaces(
    tmp_path, capsys
):
    """Regression: a resume with another --env-module registering the same id trained the
    old env (the checkpoint's module was imported last), recorded the new module, and
    plain --resume and evaluate then failed with a size mismatch."""
    base = ["--logdir", str(tmp_path), "--no-tensorboard", "--set", "ppo.num_steps=32"]
    new = ["RlamdSwap/Walk-v0", "--env-module", "tests.envs.swap_a", "--algo", "ppo"]
    assert main([*new, "--steps", "64", "--num-envs", "2", "--run-name", "s", *base]) == 0
    capsys.readouterr()
    run = str(tmp_path / "s")
    resumed = ["--resume", run, "--steps", "128", *base]
    assert main([*resumed, "--env-module", "tests.envs.swap_b"]) == 2
    err = capsys.readouterr().err
    assert (
        "is another env than the checkpoint's: its observation space is Box(-1.0, 1.0, (3,)" in err
    )
    assert "train.env_module='tests.envs.swap_a', as saved" in err
    assert load_checkpoint(tmp_path / "s" / "checkpoint.pt")["step"] == 64  # untouched


def test_periodic_evaluations_play_other_episodes_for_another_training_seed(
    tmp_path, monkeypatch, capsys
):
    """Regression: every training seed was evaluated on the env seed 10,000 + step, so a
    spread over seeds left out the episodes' own variation."""
    import rlamd.runner as runner
    from rlamd.evaluate import eval_seed

    real, seen = runner.evaluate_episodes, []

    def evaluate(*args, **kwargs):
        seen.append(kwargs["seed"])
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "evaluate_episodes", evaluate)
    for seed in (1, 2):
        run = tmp_path / f"s{seed}"
        argv = ("--eval-every", "128", "--eval-episodes", "1", "--steps", "128")
        argv += ("--seed", str(seed), "--set", "env.eval_max_steps=10")
        assert _train(run, "NeverEnds", *argv) == 0
    assert seen == [eval_seed(1, 128), eval_seed(2, 128)] and seen[0] != seen[1]


def test_eval_seeds_differ_per_training_seed_and_fit_ale_py():
    from rlamd.evaluate import eval_seed

    pairs = [(s, k * 2_000) for s in range(5) for k in range(1, 50)]
    assert len({eval_seed(s, k) for s, k in pairs}) == len(pairs)
    big = eval_seed(2**31 - 1, 10**9)
    assert 0 <= big and big + 64 <= 2**31 - 1  # ale-py: C int seeds, eval env i adds i
