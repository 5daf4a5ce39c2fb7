from __future__ import annotations

import errno
import os

import pytest
import torch

from rlamd.checkpoint import (
    CheckpointError,
    find_checkpoint,
    load_checkpoint,
    payload_digest,
    save_checkpoint,
)
from rlamd.storage import StorageError

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
    with pytest.raises(CheckpointError, match=r"looked for .*run/checkpoint\.pt") as err:
        find_checkpoint(tmp_path / "run", tmp_path)
    assert "--config" not in str(err.value)
    (tmp_path / "run" / "config.toml").write_text("[train]\n")
    with pytest.raises(CheckpointError, match=r"start it again with --config .*config\.toml"):
        find_checkpoint(tmp_path / "run", tmp_path)


def _flip_a_tensor_byte(path):
    """Flip one bit inside the stored bytes of the largest tensor (not the pickle)."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + info.file_size // 2] ^= 0x04
    path.write_bytes(bytes(data))


def test_flipped_tensor_bytes_are_refused_and_the_file_left_untouched(tmp_path):
    """Regression: bytes flipped inside a checkpoint's tensor data loaded, trained and
    evaluated silently (torch does not check the zip's CRCs)."""
    state = {**STATE, "agent": {"w": torch.arange(4096, dtype=torch.float32)}}
    path = save_checkpoint(tmp_path / "checkpoint.pt", state)
    _flip_a_tensor_byte(path)
    damaged = path.read_bytes()
    assert torch.load(path, weights_only=True)["step"] == 5  # torch alone does not notice
    with pytest.raises(CheckpointError, match="failed its integrity check.*left untouched"):
        load_checkpoint(path)
    assert path.read_bytes() == damaged


def test_a_checkpoint_without_checksum_loads_with_a_note(tmp_path):
    path = tmp_path / "old.pt"
    torch.save({"rlamd_checkpoint": 1, **STATE}, path)  # what rlamd wrote before checksums
    notes = []
    state = load_checkpoint(path, note=notes.append)
    assert state["step"] == 5 and len(notes) == 1 and "carries no checksum" in notes[0]
    assert load_checkpoint(save_checkpoint(tmp_path / "new.pt", STATE), note=notes.append)
    assert len(notes) == 1  # a checksummed one loads without a note


def test_the_checksum_covers_values_and_shapes():
    base = payload_digest({**STATE, "agent": {"w": torch.ones(2, 3)}})
    assert payload_digest({**STATE, "agent": {"w": torch.ones(2, 3)}}) == base
    for changed in (
        {**STATE, "agent": {"w": torch.ones(3, 2)}},  # same bytes, another shape
        {**STATE, "agent": {"w": torch.ones(2, 3, dtype=torch.float64)}},
        {**STATE, "agent": {"w": torch.ones(2, 3)}, "step": 6},
        {**STATE, "agent": {"w": torch.ones(2, 3), "extra": None}},
    ):
        assert payload_digest(changed) != base


class _FullDisk:
    """A file whose writes fail as on a full disk after ``room`` bytes."""

    def __init__(self, f, room: int) -> None:
        self._f, self._room = f, room

    def write(self, data) -> int:
        if len(data) > self._room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._f.name)
        self._room -= len(data)
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def test_a_full_disk_during_a_save_is_one_line_and_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    """Regression: a full disk during a checkpoint write ended in chained tracebacks
    (`RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos ...`)."""
    import builtins

    import rlamd.checkpoint as checkpoint_module

    path = save_checkpoint(tmp_path / "checkpoint.pt", STATE)
    before = path.read_bytes()
    monkeypatch.setattr(
        checkpoint_module,
        "open",
        lambda p, mode="r": _FullDisk(builtins.open(p, mode), 300),
        raising=False,
    )
    with pytest.raises(StorageError) as err:
        save_checkpoint(path, {**STATE, "step": 6})
    assert str(err.value).startswith(f"cannot write {path}: no space left on the device (")
    assert "\n" not in str(err.value)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]  # the temp file is gone


def test_ctrl_c_inside_a_save_stays_an_interrupt_and_leaves_no_temp_file(tmp_path, monkeypatch):
    """torch.save turns an interrupt raised inside its writes into a RuntimeError
    (`unexpected pos`), which ended a second Ctrl-C in a traceback."""
    import builtins

    import rlamd.checkpoint as checkpoint_module

    class Interrupted(_FullDisk):
        def write(self, data):
            raise KeyboardInterrupt

    path = save_checkpoint(tmp_path / "checkpoint.pt", STATE)
    before = path.read_bytes()
    monkeypatch.setattr(
        checkpoint_module,
        "open",
        lambda p, mode="r": Interrupted(builtins.open(p, mode), 0),
        raising=False,
    )
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {**STATE, "step": 6})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


@pytest.mark.parametrize(
    ("algo", "env", "extra"),
    [
        ("dqn", "cartpole", {}),
        ("ppo", "cartpole", {"anneal_lr": False}),
        ("td3", "Pendulum-v1", {}),
        ("sac", "Pendulum-v1", {}),
    ],
)
def test_a_resume_with_a_new_lr_and_adam_eps_applies_them(algo, env, extra):
    """The resume prints ``lr OLD -> NEW``: every optimizer of the resumed agent steps with
    the new values, not the checkpoint's (its moments still come back)."""
    import dataclasses

    from rlamd.algos import build_agent
    from rlamd.config.resume import check_resume
    from rlamd.config.sections import RunConfig, TrainConfig

    def config(**kw):
        base = RunConfig(train=TrainConfig(env=env, algo=algo, device="cpu", steps=1000))
        section = dataclasses.replace(getattr(base, algo), hidden=(8,), **extra, **kw)
        return dataclasses.replace(base, **{algo: section})

    old, new = config(lr=3e-4, adam_eps=1e-8), config(lr=5e-5, adam_eps=1e-5)
    saved = build_agent(old, torch.device("cpu")).state_dict()
    changed = check_resume(old.to_dict(), new, replay=False, step=10)
    assert f"{algo}.lr 0.0003 -> 5e-05" in changed
    agent = build_agent(new, torch.device("cpu"), agent_state=saved)
    optimizers = _optimizers(agent)
    assert optimizers
    for opt in optimizers:
        for group in opt.param_groups:
            assert float(group["lr"]) == pytest.approx(5e-5)
            assert group["eps"] == 1e-5


def _optimizers(agent) -> list[torch.optim.Optimizer]:
    """Every optimizer an agent holds, in itself or in a part (a twin critic)."""
    found = []
    for value in vars(agent).values():
        if isinstance(value, torch.optim.Optimizer):
            found.append(value)
        elif hasattr(value, "__dict__") and not isinstance(value, torch.nn.Module | torch.Tensor):
            found.extend(v for v in vars(value).values() if isinstance(v, torch.optim.Optimizer))
    return found
