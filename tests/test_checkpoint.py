from __future__ import annotations

import pytest
import torch

from rlamd.checkpoint import CheckpointError, find_checkpoint, load_checkpoint, save_checkpoint

STATE = {"config": {"train": {"algo": "dqn"}}, "step": 5, "agent": {"w": torch.ones(3)}}


def test_save_is_atomic_and_loads_weights_only(tmp_path):
    path = save_checkpoint(tmp_path / "run" / "checkpoint.pt", STATE)
    assert [p.name for p in path.parent.iterdir()] == ["checkpoint.pt"]  # no temp file left
    state = load_checkpoint(path, algo="dqn")
    assert state["step"] == 5 and torch.equal(state["agent"]["w"], torch.ones(3))
    assert find_checkpoint("run", tmp_path) == path
    assert find_checkpoint(path.parent) == path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a zip at all", "is not a readable rlamd checkpoint"),
        (None, "is not a readable rlamd checkpoint"),  # truncated real checkpoint
    ],
)
def test_corrupt_checkpoint_is_refused_and_left_untouched(tmp_path, content, message):
    path = save_checkpoint(tmp_path / "checkpoint.pt", STATE)
    if content is None:
        content = path.read_bytes()[:200]
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path)
    assert path.read_bytes() == content


def test_pickled_code_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"rlamd_checkpoint": 1, "config": {}, "step": 0, "agent": object()}, path)
    with pytest.raises(CheckpointError, match="not a readable rlamd checkpoint"):
        load_checkpoint(path)


def test_other_files_and_algos_are_refused(tmp_path):
    torch.save({"weights": torch.ones(1)}, tmp_path / "plain.pt")
    with pytest.raises(CheckpointError, match="not an rlamd checkpoint"):
        load_checkpoint(tmp_path / "plain.pt")
    path = save_checkpoint(tmp_path / "c.pt", STATE)
    with pytest.raises(CheckpointError, match="algo='dqn', not 'ppo'"):
        load_checkpoint(path, algo="ppo")
    with pytest.raises(CheckpointError, match="Runs with a checkpoint"):
        save_checkpoint(tmp_path / "runs" / "breakout_a" / "checkpoint.pt", STATE)
        find_checkpoint("pong", tmp_path / "runs")
    with pytest.raises(CheckpointError, match="Closest runs: breakout_a"):
        find_checkpoint("breakout_b", tmp_path / "runs")


def test_a_folder_without_checkpoint_names_the_file_looked_for(tmp_path):
    (tmp_path / "run").mkdir()
    with pytest.raises(CheckpointError, match=r"looked for .*run/checkpoint\.pt"):
        find_checkpoint(tmp_path / "run", tmp_path)
