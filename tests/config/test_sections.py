"""RunConfig's sections from the registry, and settings that moved (rlamd.config.sections).

The algorithms' sections come from ``rlamd.algos.register``; ``cfg.dqn`` / ``cfg.ppo`` /
``cfg.agent``, keywords, ``dataclasses.replace``, pickling and equality keep working. The
Ape-X settings moved from ``[ray]`` to ``[dqn]``: old config files, ``--set`` items and
checkpoints that name the old place are read at the new one, with one note line.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re

import pytest

from rlamd.agents.dqn import DQNConfig
from rlamd.agents.ppo import PPOConfig
from rlamd.algos import ALGORITHMS
from rlamd.config import to_toml
from rlamd.config.errors import ConfigError
from rlamd.config.layers import resolve
from rlamd.config.sections import (
    ALGORITHM_SECTIONS,
    MOVED_KEYS,
    SECTION_TYPES,
    RayConfig,
    RunConfig,
    TrainConfig,
    move_keys,
    register_section,
)

APEX = ("chunk_steps", "ship_frames", "weights_every", "apex_epsilon", "apex_alpha")
OLD = {"chunk_steps": 16, "ship_frames": False, "weights_every": 7, "apex_epsilon": 0.3}
"""Ape-X settings as an old run saved them, in [ray]."""


def _old_style(cfg: RunConfig) -> dict:
    """``cfg.to_dict()`` as rlamd wrote it before the Ape-X settings moved to ``dqn``."""
    data = cfg.to_dict()
    for key in APEX:
        data["ray"][key] = data["dqn"].pop(key)
    data["ray"].update(OLD)
    return data


def test_the_sections_come_from_the_registry():
    assert list(SECTION_TYPES) == ["train", "dqn", "ppo", "sac", "td3", "atari", "env", "ray"]
    assert {n: type(a).config for n, a in ALGORITHMS.items()} == ALGORITHM_SECTIONS
    cfg = RunConfig()
    assert cfg.dqn == DQNConfig() and cfg.ppo == PPOConfig() and cfg.agent is cfg.dqn
    assert [name for name, _ in cfg.algorithms] == list(ALGORITHMS)
    assert list(cfg.sections()) == list(SECTION_TYPES)


def test_algorithm_sections_by_keyword_replace_pickle_and_equality():
    cfg = RunConfig(train=TrainConfig(algo="ppo"), ppo=PPOConfig(lr=1e-3))
    assert cfg.agent is cfg.ppo and cfg.ppo.lr == 1e-3 and cfg.dqn == DQNConfig()
    lower = dataclasses.replace(cfg, ppo=dataclasses.replace(cfg.ppo, lr=1e-4))
    assert lower.ppo.lr == 1e-4 and cfg.ppo.lr == 1e-3 and lower != cfg
    again = RunConfig(train=cfg.train, ppo=cfg.ppo)
    assert dataclasses.replace(lower, ppo=cfg.ppo) == cfg == again and hash(cfg) == hash(again)
    for clone in (pickle.loads(pickle.dumps(cfg)), copy.deepcopy(cfg)):
        assert clone == cfg and clone.ppo.lr == 1e-3
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(TypeError, match="RunConfig: no section ddpg; sections: train, dqn, ppo"):
        RunConfig(ddpg=DQNConfig())
    with pytest.raises(AttributeError, match="RunConfig has no section 'ddpg'"):
        _ = cfg.ddpg
    with pytest.raises(ConfigError, match="train.algo='ddpg' is not a registered algorithm"):
        _ = RunConfig(train=TrainConfig(algo="ddpg")).agent


def test_a_section_must_be_a_frozen_dataclass_under_a_free_name():
    @dataclasses.dataclass
    class Loose:
        x: int = 1

    with pytest.raises(TypeError, match="not a frozen dataclass"):
        register_section("loose", Loose)
    with pytest.raises(ValueError, match="registered already, as DQNConfig"):
        register_section("dqn", PPOConfig)
    for name in ("env", "to_dict", "2x", "_x"):
        with pytest.raises(ValueError, match=repr(name)):
            register_section(name, DQNConfig)
    assert "loose" not in SECTION_TYPES
    assert list(ALGORITHM_SECTIONS) == ["dqn", "ppo", "sac", "td3"]


def test_the_ape_x_settings_are_dqns_and_checked_there():
    assert {MOVED_KEYS[f"ray.{k}"] for k in APEX} == {f"dqn.{k}" for k in APEX}
    assert not {f.name for f in dataclasses.fields(RayConfig)} & set(APEX)
    with pytest.raises(ConfigError, match=r"^dqn\.apex_epsilon=0\.0; accepted: a number in"):
        resolve({"train": {"env": "cartpole"}}, sets=["dqn.apex_epsilon=0"])
    with pytest.raises(ConfigError, match=r"^dqn\.chunk_steps=0; accepted: an integer >= 1$"):
        resolve({"train": {"env": "cartpole"}}, sets=["chunk_steps=0"])  # a bare key finds it


def test_move_keys_reads_the_old_place_at_the_new_one_and_the_new_place_wins():
    layers = {"ray": {"chunk_steps": 8, "num_learners": 2}, "dqn": {"weights_every": 3}}
    layers["ray"]["weights_every"] = 9
    assert move_keys(layers) == [
        "ray.chunk_steps is now dqn.chunk_steps",
        "ray.weights_every is now dqn.weights_every",
    ]
    assert layers == {"ray": {"num_learners": 2}, "dqn": {"weights_every": 3, "chunk_steps": 8}}
    assert move_keys(layers) == []


def test_an_old_checkpoints_settings_load_with_the_ape_x_ones_in_dqn():
    saved = _old_style(RunConfig())
    notes: list[str] = []
    cfg = RunConfig.from_dict(saved, note=notes.append)
    assert (cfg.dqn.chunk_steps, cfg.dqn.ship_frames, cfg.dqn.weights_every) == (16, False, 7)
    assert cfg.dqn.apex_epsilon == 0.3 and cfg.dqn.apex_alpha == 7.0
    assert notes == [
        "rlamd: note: the saved settings: ray.chunk_steps is now dqn.chunk_steps, "
        "ray.ship_frames is now dqn.ship_frames, ray.weights_every is now dqn.weights_every, "
        "ray.apex_epsilon is now dqn.apex_epsilon, ray.apex_alpha is now dqn.apex_alpha "
        "(read there)"
    ]
    assert "chunk_steps" in saved["ray"]  # the caller's dict is left as it was
    assert RunConfig.from_dict(saved) == cfg  # silent without a note callback


def test_an_old_config_file_and_old_set_items_still_work(tmp_path, capsys):
    text = to_toml(RunConfig(train=TrainConfig(env="cartpole")).sections())
    for key in APEX:  # an old file: no Ape-X lines in [dqn], and [ray] (the last table) has them
        text = re.sub(rf"^{key} = .*\n", "", text, flags=re.M)
    assert text.rstrip().rsplit("\n[", 1)[1].startswith("ray]")
    text += "chunk_steps = 16\nship_frames = false\nweights_every = 7\napex_epsilon = 0.3\n"
    path = tmp_path / "config.toml"
    path.write_text(text)
    assert "[ray]" in text and "chunk_steps = 16" in text
    cfg = resolve({}, config_file=str(path), sets=["ray.apex_alpha=2"])
    assert cfg.dqn.chunk_steps == 16 and not cfg.dqn.ship_frames and cfg.dqn.apex_alpha == 2.0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(
        f"rlamd: note: --config {path}: ray.chunk_steps is now dqn.chunk_steps"
    )
    assert err[1] == "rlamd: note: --set: ray.apex_alpha is now dqn.apex_alpha (read there)"
    assert len(err) == 2
    # the new place, given later, wins over the old one from the file
    assert resolve({}, config_file=str(path), sets=["dqn.chunk_steps=4"]).dqn.chunk_steps == 4


def test_fit_settings_at_the_old_place_are_read_at_the_new_one(capsys):
    """``rlamd.fit(settings={"ray.chunk_steps": 16})`` works as ``--set`` does: read at
    ``dqn.chunk_steps``, with the one-line note (the settings go in as flags)."""
    from rlamd.api import _layers

    given = {"ray.chunk_steps": 16, "ray": {"ship_frames": False}}
    cfg = resolve(_layers(given, {"env": "cartpole"}))
    assert cfg.dqn.chunk_steps == 16 and cfg.dqn.ship_frames is False
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "rlamd: note: settings: ray.chunk_steps is now dqn.chunk_steps, "
        "ray.ship_frames is now dqn.ship_frames (read there)"
    )


def test_resuming_an_old_checkpoint_notes_the_move_once(capsys):
    saved = _old_style(RunConfig(train=TrainConfig(env="cartpole")))
    cfg = resolve({}, saved=saved)
    assert cfg.dqn.chunk_steps == 16
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rlamd: note: the checkpoint: ray.chunk_steps is now dqn.chunk_steps")


def test_an_old_checkpoint_resumes_and_evaluates(tmp_path, capsys):
    """A checkpoint written before the move (Ape-X settings in ``[ray]``) goes on training
    and evaluates; the note is said once, and nothing else is reported as changed."""
    import torch

    from rlamd.checkpoint import save_checkpoint
    from rlamd.evaluate import main as evaluate
    from rlamd.train import main as train

    common = ["--device", "cpu", "--no-tensorboard", "--eval-every", "0", "--logdir", str(tmp_path)]
    args = ["cartpole", "--steps", "200", "--run-name", "old", "--set", "dqn.learning_starts=50"]
    assert train([*args, *common]) == 0
    path = tmp_path / "old" / "checkpoint.pt"
    state = torch.load(path, weights_only=True)
    state.pop("rlamd_sha256", None)
    state["config"] = _old_style(RunConfig.from_dict(state["config"]))
    save_checkpoint(path, state)
    capsys.readouterr()
    assert train(["--resume", str(path.parent), "--steps", "300", *common]) == 0
    out, err = capsys.readouterr()
    assert err.count("rlamd: note: the checkpoint: ray.chunk_steps is now dqn.chunk_steps") == 1
    assert "except train.steps 200 -> 300\n" in out  # the moved settings kept their values
    assert torch.load(path, weights_only=True)["config"]["dqn"]["chunk_steps"] == 16
    assert evaluate([str(path.parent), "--episodes", "1", "--device", "cpu"]) == 0
