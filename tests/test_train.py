"""The training command end to end: errors, Breakout smoke with SIGINT/resume/evaluate,
CartPole learning and same-seed determinism."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from rlamd.train import main

PY = [sys.executable, "-m"]


def _run(args, cwd):
    return subprocess.run([*PY, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["breakuot"], "Closest valid names: breakout"),
        (["breakout", "--steps", "0"], "steps=0; accepted: an integer >= 1"),
        (["breakout", "--device", "hipp"], "Did you mean 'hip'"),
        (["breakout", "--set", "dqn.gama=0.9"], "Did you mean dqn.gamma"),
        (["breakout", "--set", "dqn.gamma=2"], "gamma=2.0; accepted: a number in [0, 1]"),
        (["cartpole", "--resume", "nowhere"], "No checkpoint at 'nowhere'"),
        ([], "give an environment"),
    ],
)
def test_invalid_values_fail_before_any_work(tmp_path, capsys, args, message):
    assert main([*args, "--logdir", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was created


@pytest.mark.parametrize("columns", ["60", "120"])
def test_help_lists_every_option_with_its_default(columns):
    """Regression: in a 120-column terminal (pytest's readline sets COLUMNS, which the
    child inherits) argparse wrapped "(default:\n 10000000)" and this failed."""
    env = {**os.environ, "COLUMNS": columns}
    out = subprocess.run(
        [*PY, "rlamd.train", "--help"], capture_output=True, text=True, timeout=600, env=env
    ).stdout
    assert "(default:\n" not in out and "(default: " in out
    for opt in (
        "--algo",
        "--steps",
        "--num-envs",
        "--device",
        "--precision",
        "--seed",
        "--logdir",
        "--run-name",
        "--config",
        "--set",
        "--resume",
        "--eval-every",
        "--checkpoint-every",
        "--compile",
    ):
        assert opt in out
    assert "(default: 10000000)" in out and "dqn.lr = 0.0001" in out
    # one spelling of booleans and None, no markup, no issue numbers
    assert "(default: False)" not in out and "--ray" in out and "= off:" in out
    assert "`" not in out and "(issue" not in out and "= None" not in out
    assert "auto: what fits in memory" in out


def test_hip_on_a_machine_without_gpu_points_to_doctor(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["cartpole", "--device", "hip", "--logdir", str(tmp_path)]) == 2
    assert "rlamd.doctor" in capsys.readouterr().err


@pytest.mark.slow
def test_breakout_smoke_sigint_resume_evaluate(tmp_path):
    args = [
        "rlamd.train",
        "breakout",
        "--steps",
        "2400",
        "--num-envs",
        "4",
        "--logdir",
        str(tmp_path),
        "--run-name",
        "smoke",
        "--checkpoint-every",
        "400",
        "--log-every",
        "400",
        "--eval-every",
        "0",
        "--set",
        "dqn.learning_starts=400",
        "--set",
        "dqn.buffer_size=8000",
        "--save-replay",
    ]
    run_dir = tmp_path / "smoke"
    proc = subprocess.Popen(
        [*PY, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.time() + 300
    while not (run_dir / "checkpoint.pt").exists():
        assert proc.poll() is None, proc.stdout.read()
        assert time.time() < deadline
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 128 + signal.SIGINT, out
    assert "stopped by signal" in out and "--resume" in out
    stopped = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert 400 <= stopped["step"] < 2400
    assert any(p.name.startswith("events.out.tfevents") for p in run_dir.iterdir())
    assert "replay" in stopped and "contents" in stopped["replay"]["storage"]

    res = _run(["rlamd.train", "--resume", str(run_dir), "--logdir", str(tmp_path)], None)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"resuming at step {stopped['step']:,}" in res.stdout
    final = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert final["step"] == 2400
    assert final["agent"]["updates"] > stopped["agent"]["updates"]

    ev = _run(
        [
            "rlamd.evaluate",
            "smoke",
            "--logdir",
            str(tmp_path),
            "--episodes",
            "2",
            "--json",
            "--video",
            str(tmp_path / "video"),
        ],
        None,
    )
    assert ev.returncode == 0, ev.stderr
    result = json.loads(ev.stdout)
    assert result["episodes"] == 2 and result["step"] == 2400
    assert result["min"] <= result["mean"] <= result["max"]
    assert list((tmp_path / "video").glob("episode_*.gif"))


def test_resume_refuses_corrupt_checkpoint_and_keeps_it(tmp_path, capsys):
    run_dir = tmp_path / "bad"
    run_dir.mkdir()
    (run_dir / "checkpoint.pt").write_bytes(b"garbage")
    assert main(["--resume", str(run_dir), "--logdir", str(tmp_path)]) == 2
    assert "not a readable rlamd checkpoint" in capsys.readouterr().err
    assert (run_dir / "checkpoint.pt").read_bytes() == b"garbage"


def _cartpole(tmp_path, name, steps, extra=()):
    args = [
        "cartpole",
        "--device",
        "cpu",
        "--steps",
        str(steps),
        "--logdir",
        str(tmp_path),
        "--run-name",
        name,
        "--eval-every",
        "0",
        "--no-tensorboard",
        *extra,
    ]
    assert main(args) == 0
    return torch.load(tmp_path / name / "checkpoint.pt", weights_only=True)


def test_same_seed_same_numbers_on_cpu(tmp_path):
    extra = ["--set", "dqn.learning_starts=200", "--seed", "3"]
    a = _cartpole(tmp_path, "a", 1000, extra)
    b = _cartpole(tmp_path, "b", 1000, extra)
    assert a["scores"] == b["scores"] and len(a["scores"]) > 10
    for k, v in a["agent"]["q"].items():
        assert torch.equal(v, b["agent"]["q"][k]), k
    c = _cartpole(tmp_path, "c", 1000, ["--set", "dqn.learning_starts=200", "--seed", "4"])
    assert c["scores"] != a["scores"]
    assert any(not torch.equal(v, c["agent"]["q"][k]) for k, v in a["agent"]["q"].items())


def test_resume_cannot_change_env_or_num_envs(tmp_path, capsys):
    _cartpole(tmp_path, "r", 200)
    assert (
        main(["--resume", str(tmp_path / "r"), "--num-envs", "2", "--logdir", str(tmp_path)]) == 2
    )
    assert "train.num_envs=2 (--resume cannot change it)" in capsys.readouterr().err


@pytest.mark.slow
def test_dqn_learns_cartpole(tmp_path):
    """Budget: 40,000 env steps on this 2-core CPU (about 30 s); greedy mean >= 195 over 20 games."""
    from rlamd.evaluate import main as evaluate

    _cartpole(tmp_path, "learn", 40_000)
    out_file = tmp_path / "eval.json"
    with open(out_file, "w") as f:
        old, sys.stdout = sys.stdout, f
        try:
            assert (
                evaluate(
                    [
                        "learn",
                        "--logdir",
                        str(tmp_path),
                        "--episodes",
                        "20",
                        "--json",
                        "--device",
                        "cpu",
                    ]
                )
                == 0
            )
        finally:
            sys.stdout = old
    result = json.loads(out_file.read_text())
    assert result["mean"] >= 195, result


@pytest.mark.slow
def test_ppo_learns_cartpole(tmp_path, capsys):
    """Budget: the classic preset's 150,000 env steps (about 25 s on this 2-core CPU);
    greedy-free (sampled) evaluation mean >= 475 over 20 games."""
    from rlamd.evaluate import main as evaluate

    args = [
        "cartpole",
        "--algo",
        "ppo",
        "--device",
        "cpu",
        "--logdir",
        str(tmp_path),
        "--run-name",
        "ppo",
        "--eval-every",
        "0",
        "--no-tensorboard",
    ]
    assert main(args) == 0
    capsys.readouterr()
    assert (
        evaluate(
            ["ppo", "--logdir", str(tmp_path), "--episodes", "20", "--json", "--device", "cpu"]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["mean"] >= 475, result


@pytest.mark.slow
def test_ppo_breakout_smoke_resume_and_evaluate(tmp_path, capsys):
    common = ["--logdir", str(tmp_path), "--eval-every", "0", "--log-every", "512"]
    args = [
        "breakout",
        "--algo",
        "ppo",
        "--steps",
        "1024",
        "--num-envs",
        "4",
        "--run-name",
        "p",
        "--checkpoint-every",
        "1024",
        "--set",
        "ppo.num_steps=64",
        *common,
    ]
    assert main(args) == 0  # a first part of 1024 steps, then extended to 2048
    first = torch.load(tmp_path / "p" / "checkpoint.pt", weights_only=True)
    assert first["step"] == 1024 and first["config"]["train"]["algo"] == "ppo"
    assert main(["--resume", str(tmp_path / "p"), "--steps", "2048", *common]) == 0
    final = torch.load(tmp_path / "p" / "checkpoint.pt", weights_only=True)
    assert final["step"] == 2048 and final["agent"]["updates"] == 2 * first["agent"]["updates"]
    assert "resuming at step 1,024" in capsys.readouterr().out
    from rlamd.evaluate import main as evaluate

    assert evaluate(["p", "--logdir", str(tmp_path), "--episodes", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 2
    assert evaluate(["p", "--logdir", str(tmp_path), "--epsilon", "0.05"]) == 2
    assert "--epsilon=0.05 (ppo plays its policy's own actions" in capsys.readouterr().err


def test_ppo_same_seed_same_numbers(tmp_path):
    def go(name, seed):
        args = [
            "cartpole",
            "--algo",
            "ppo",
            "--device",
            "cpu",
            "--steps",
            "4096",
            "--logdir",
            str(tmp_path),
            "--run-name",
            name,
            "--eval-every",
            "0",
            "--no-tensorboard",
            "--seed",
            str(seed),
        ]
        assert main(args) == 0
        return torch.load(tmp_path / name / "checkpoint.pt", weights_only=True)

    a, b, c = go("a", 5), go("b", 5), go("c", 6)
    assert a["scores"] == b["scores"] and a["scores"] != c["scores"]
    for k, v in a["agent"]["net"].items():
        assert torch.equal(v, b["agent"]["net"][k]), k


def test_gpu_error_during_training_points_to_the_doctor(tmp_path, capsys, monkeypatch):
    import rlamd.train as train_module

    def boom(*args, **kwargs):
        raise torch.OutOfMemoryError("HIP out of memory. Tried to allocate 7.03 GiB")

    monkeypatch.setattr(train_module, "run", boom)
    assert main(["cartpole", "--logdir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "GPU out of memory" in err and "python -m rlamd.doctor" in err and "--resume" in err
    monkeypatch.setattr(
        train_module, "run", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("a plain bug"))
    )
    with pytest.raises(RuntimeError, match="a plain bug"):
        main(["cartpole", "--logdir", str(tmp_path)])


def test_profile_flag_writes_a_trace_with_named_ranges(tmp_path):
    args = [
        "cartpole",
        "--steps",
        "600",
        "--logdir",
        str(tmp_path),
        "--run-name",
        "p",
        "--eval-every",
        "0",
        "--no-tensorboard",
        "--profile",
        "3",
        "--set",
        "dqn.learning_starts=100",
        "--set",
        "dqn.train_frequency=1",
    ]
    assert main(args) == 0
    trace = (tmp_path / "p" / "profile" / "rlamd.pt.trace.json").read_text()
    for name in ("act", "env", "add", "learn", "sample", "update", "priorities"):
        assert f'"name": "{name}"' in trace, name


def test_profile_that_never_starts_says_why(tmp_path, capsys):
    """`--profile` on a run that ends before learning starts used to write nothing, silently."""
    args = ["cartpole", "--steps", "300", "--logdir", str(tmp_path), "--run-name", "q"]
    args += ["--eval-every", "0", "--no-tensorboard", "--profile", "3"]
    assert main(args) == 0
    assert not (tmp_path / "q" / "profile").exists()
    out = capsys.readouterr()
    assert "--profile 3 wrote no trace: the run ended at step 300" in out.out + out.err


def test_ray_without_ray_installed_says_how_to_get_it(tmp_path, capsys, monkeypatch):
    """`--ray` in a Python without Ray used to end in a ModuleNotFoundError traceback."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    assert main(["cartpole", "--ray", "--logdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--ray needs Ray" in err and "setup.sh --ray" in err
    assert not any(tmp_path.iterdir())  # no run folder for a run that cannot start


@pytest.mark.parametrize(("minutes", "more_than_the_last"), [(0.005, True), (0.0, False)])
def test_a_slow_run_also_checkpoints_by_the_clock(
    tmp_path, monkeypatch, minutes, more_than_the_last
):
    """A run killed between step checkpoints lost everything since the last one: 100k
    steps, minutes on a CPU. Now one is also written after train.checkpoint_minutes."""
    from rlamd import runner

    saved: list[int] = []
    real = runner._Run.checkpoint

    def counting(self):
        saved.append(self.step)
        real(self)

    monkeypatch.setattr(runner._Run, "checkpoint", counting)
    args = ["cartpole", "--steps", "1500", "--logdir", str(tmp_path), "--eval-every", "0"]
    args += ["--no-tensorboard", "--checkpoint-every", "1000000"]
    args += ["--set", f"train.checkpoint_minutes={minutes}"]  # 0.005 min = 0.3 s
    assert main(args) == 0
    assert saved[-1] == 1500
    assert (len(saved) > 1 and saved[0] < 1500) == more_than_the_last


def test_a_save_slower_than_the_clock_interval_does_not_make_every_step_save(tmp_path, monkeypatch):
    """The clock interval counts from the end of a write: a save that took longer than
    train.checkpoint_minutes (a large replay on a slow disk) saved again at every step."""
    import types
    from itertools import pairwise

    from rlamd import runner

    clock = [0.0]

    def monotonic() -> float:
        clock[0] += 1.0  # every reading of the run's clock is a second later
        return clock[0]

    monkeypatch.setattr(
        runner, "time", types.SimpleNamespace(monotonic=monotonic, strftime=time.strftime)
    )
    saved: list[int] = []
    real = runner.save_checkpoint

    def slow_save(path, state):
        clock[0] += 60.0  # a minute a save, twice the interval below
        saved.append(state["step"])
        real(path, state)

    monkeypatch.setattr(runner, "save_checkpoint", slow_save)
    args = ["cartpole", "--steps", "800", "--logdir", str(tmp_path), "--eval-every", "0"]
    args += ["--no-tensorboard", "--checkpoint-every", "1000000"]
    args += ["--set", "train.checkpoint_minutes=0.5"]  # 30 readings of the clock
    assert main(args) == 0
    steps = sorted(set(saved))
    assert steps[-1] == 800 and len(steps) > 2  # the clock still saves a slow run
    assert all(b - a > 4 * 4 for a, b in pairwise(steps[:-1])), steps


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["cartpole", "--steps", "99999999999999999999"],
            "train.steps=99999999999999999999 (env i at step s gets seed train.seed + s + i, "
            "and ale-py takes seeds up to 2**31 - 1); accepted: an integer from 1 to "
            "1,000,000,000",
        ),
        (
            ["cartpole", "--set", "ppo.num_steps=99999999999999999999"],
            "ppo.num_steps=99999999999999999999; accepted: an integer from 0 to "
            "9,223,372,036,854,775,807",
        ),
    ],
)
def test_a_number_too_large_names_its_own_setting_and_bound(tmp_path, capsys, args, message):
    """Regression: --steps 99999999999999999999 answered "train.seed=1 (...); accepted: an
    integer from 0 to 0"."""
    assert main([*args, "--logdir", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
