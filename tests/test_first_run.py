"""What a newcomer meets: the replay checked against free memory, resume that says what
it restored, a resume hint that runs in a fresh shell, the CPU forecast."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import rlamd.algos.dqn_replay as dqn_algo
from rlamd.config import ConfigError
from rlamd.config.sections import RunConfig
from rlamd.train import main

GiB = 2**30


def test_fit_capacity_refuses_and_names_what_fits(monkeypatch):
    monkeypatch.setattr(dqn_algo, "free_memory", lambda device: 2 * GiB)
    with pytest.raises(ConfigError, match=r"dqn.buffer_size=1,000,000 .* at most 245,426"):
        dqn_algo.fit_capacity(
            1_000_000, 7_000.0, torch.device("cpu"), print, setting="dqn.buffer_size"
        )
    assert (
        dqn_algo.fit_capacity(
            200_000, 7_000.0, torch.device("cpu"), print, setting="dqn.buffer_size"
        )
        == 200_000
    )


def test_auto_buffer_size_takes_what_fits_and_says_so(monkeypatch):
    monkeypatch.setattr(dqn_algo, "free_memory", lambda device: 2 * GiB)
    said: list[str] = []
    size = dqn_algo.fit_capacity(
        None, 7_000.0, torch.device("cpu"), said.append, setting="dqn.buffer_size"
    )
    assert size == int(0.8 * 2 * GiB / 7_000.0)
    assert "dqn.buffer_size=auto" in said[0] and f"{size:,}" in said[0]
    monkeypatch.setattr(dqn_algo, "free_memory", lambda device: 1000 * GiB)
    assert (
        dqn_algo.fit_capacity(
            None, 7_000.0, torch.device("cpu"), said.append, setting="dqn.buffer_size"
        )
        == dqn_algo.DEFAULT_BUFFER
    )


def test_training_stops_before_the_run_folder_when_the_replay_cannot_fit(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(dqn_algo, "free_memory", lambda device: 2**20)  # 1 MiB free
    args = ["cartpole", "--logdir", str(tmp_path), "--run-name", "r", "--steps", "500"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: dqn.buffer_size=50,000 needs") and "Traceback" not in err
    assert "--set dqn.buffer_size=" in err
    assert not (tmp_path / "r").exists()


def _loop(learning_starts: int, train_frequency: int = 1):
    from rlamd.algos import build_agent, get_algorithm
    from rlamd.collector import Collector
    from rlamd.envs import make_env

    cfg = RunConfig.from_dict(
        {
            "train": {
                "env": "cartpole",
                "algo": "dqn",
                "num_envs": 4,
                "device": "cpu",
                "steps": 10_000,
            },
            "dqn": {
                "buffer_size": 5_000,
                "batch_size": 16,
                "learning_starts": learning_starts,
                "train_frequency": train_frequency,
            },
        }
    )
    env = make_env("cartpole", num_envs=4)
    agent = build_agent(cfg, torch.device("cpu"), env)
    collector = Collector(env, torch.device("cpu"), seed=0)
    return get_algorithm("dqn").local_loop(cfg, collector, agent, 2_000, print), agent


def test_resume_without_saved_replay_refills_before_updating_and_says_so():
    loop, agent = _loop(learning_starts=200)
    saved = {"replay": loop.buffer.state_dict(include_contents=False), "credit": 4}
    said = loop.load_state_dict(saved)  # a GPU's checkpoint may owe updates: none are paid
    assert "no replay contents" in said[0] and "200 transitions" in said[0]
    while len(loop.buffer) < 150:
        loop.iterate()
        assert agent.updates == 0  # step 2,000 is past learning_starts, but the replay is empty
    while len(loop.buffer) < 260:
        loop.iterate()
    assert agent.updates > 0
    loop.collector.close()


@pytest.mark.slow
def test_resume_with_saved_replay_says_it_came_back():
    loop, _ = _loop(learning_starts=100)
    for _ in range(30):
        loop.iterate()
    state = loop.state_dict(include_replay=True)
    other, _ = _loop(learning_starts=100)
    said = other.load_state_dict(state)
    assert said == [f"rlamd: replay restored from the checkpoint: {len(loop.buffer):,} transitions"]
    restored = other.buffer.storage  # its episodes in progress end: the envs were reset
    assert not restored._pending.any() and restored._next_first.all()
    assert loop.buffer.storage._pending.any()
    loop.collector.close()
    other.collector.close()


def test_a_resume_keeps_the_update_phase_of_train_frequency():
    # 4 envs, an update every 3 env steps: 4/3 updates per vector step, so the loop
    # carries a fraction of an update from one step to the next.
    loop, agent = _loop(learning_starts=0, train_frequency=3)
    for _ in range(40):
        loop.iterate()
        if agent.updates and loop._credit == 2:
            break
    assert loop._credit == 2
    state = loop.state_dict(include_replay=True)
    other, resumed = _loop(learning_starts=0, train_frequency=3)
    other.load_state_dict(state)
    before = (agent.updates, resumed.updates)
    loop.iterate()
    other.iterate()
    assert agent.updates - before[0] == 2  # 2 env steps owed, 4 more: 6 = two updates
    assert resumed.updates - before[1] == 2
    loop.collector.close()
    other.collector.close()


def test_resume_hint_names_the_interpreter_that_ran(monkeypatch, tmp_path):
    from rlamd import stops as runner

    cfg = RunConfig()
    venv_python = tmp_path / ".venv" / "bin" / "python"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "executable", str(venv_python))
    monkeypatch.setattr(sys, "argv", ["/x/rlamd/train.py"])
    monkeypatch.setattr(runner.shutil, "which", lambda name: "/usr/bin/" + name)
    hint = runner.resume_command(Path("runs/a"), cfg)
    assert hint == ".venv/bin/python -m rlamd.train --resume runs/a"
    monkeypatch.setattr(runner.shutil, "which", lambda name: str(venv_python))
    assert runner.resume_command(Path("runs/a"), cfg).startswith("python -m rlamd.train")


def test_cpu_forecast_line(tmp_path, capsys, monkeypatch):
    """On a CPU the first lines say how long the run will take and what the replay holds."""
    from rlamd import runner

    monkeypatch.setattr(runner, "FORECAST_AFTER_S", 0.0)
    args = [
        "cartpole",
        "--logdir",
        str(tmp_path),
        "--run-name",
        "f",
        "--steps",
        "400",
        "--eval-every",
        "0",
        "--no-tensorboard",
        "--set",
        "dqn.learning_starts=200",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    line = next(t for t in out.splitlines() if t.startswith("rlamd: no GPU"))
    assert "env steps/s before learning starts" in line and "take about" in line
    assert "MiB of host memory" in line


def test_set_buffer_size_auto_trains_with_what_fits(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(dqn_algo, "free_memory", lambda device: 64 * 2**20)  # 64 MiB free
    args = [
        "cartpole",
        "--logdir",
        str(tmp_path),
        "--run-name",
        "a",
        "--steps",
        "300",
        "--eval-every",
        "0",
        "--no-tensorboard",
        "--set",
        "dqn.buffer_size=auto",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    line = next(t for t in out.splitlines() if "dqn.buffer_size=auto" in t)
    assert "transitions" in line and "of the 0.1 GiB free host RAM" in line


def test_an_auto_sized_saved_replay_resumes_at_its_saved_size(tmp_path, capsys, monkeypatch):
    """``buffer_size=auto`` with ``--save-replay``: at the resume less memory is free (the
    loaded checkpoint holds the replay), so ``auto`` alone would size another replay,
    which cannot take the saved contents; the resumed run keeps the saved size."""
    monkeypatch.setattr(dqn_algo, "free_memory", lambda device: 8 * 2**20)
    common = ["--logdir", str(tmp_path), "--eval-every", "0", "--no-tensorboard"]
    args = ["cartpole", "--run-name", "a", "--steps", "300", "--save-replay", *common]
    assert main([*args, "--set", "dqn.buffer_size=auto", "--set", "dqn.learning_starts=200"]) == 0
    first = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)
    size = first["replay"]["storage"]["capacity"]
    assert size < 1_000_000  # sized by the free memory, not the 1M cap
    monkeypatch.setattr(dqn_algo, "free_memory", lambda device: 7 * 2**20)  # 1 MiB less
    capsys.readouterr()
    assert main(["--resume", str(tmp_path / "a"), "--steps", "400", *common]) == 0
    out = capsys.readouterr().out
    assert "replay restored from the checkpoint" in out
    final = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)
    assert final["step"] == 400 and final["replay"]["storage"]["capacity"] == size
