from __future__ import annotations

import pytest

from rlamd.agents.dqn import DQNConfig
from rlamd.config import ConfigError, apply_overrides, load_toml, parse_set, to_toml
from rlamd.envs import AtariConfig
from rlamd.train import SECTION_TYPES, TrainConfig

SECTIONS = {name: cls() for name, cls in SECTION_TYPES.items()}


def test_set_fills_sections_with_types():
    got = parse_set(
        ["dqn.lr=3e-4", "steps=1_000", "atari.sticky=0.25", "dqn.hidden=64,64"], SECTIONS
    )
    assert got == {
        "dqn": {"lr": "3e-4", "hidden": "64,64"},
        "train": {"steps": "1_000"},
        "atari": {"sticky": "0.25"},
    }
    dqn = apply_overrides(DQNConfig(), "dqn", got["dqn"])
    assert dqn.lr == 3e-4 and dqn.hidden == (64, 64)
    assert apply_overrides(TrainConfig(), "train", got["train"]).steps == 1000
    assert apply_overrides(AtariConfig(), "atari", got["atari"]).sticky == 0.25


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["dqn.lrr=1"], "Unknown setting 'dqn.lrr'. Did you mean dqn.lr"),
        (
            ["dqm.lr=1"],
            "unknown section 'dqm'; accepted: train, dqn, ppo, atari, ray. Did you mean 'dqn'",
        ),
        (["learnig_starts=5"], "Did you mean learning_starts"),
        (["lr"], "expected key=value"),
        (["hidden=8"], "'hidden' exists in dqn, ppo; write e.g. dqn.hidden=8"),
    ],
)
def test_set_errors_name_the_nearest(items, message):
    with pytest.raises(ConfigError, match=message):
        sets = parse_set(items, SECTIONS)
        for section, values in sets.items():
            apply_overrides(SECTIONS[section], section, values)


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("train", "steps", "lots", "train.steps='lots' is not valid; accepted: a whole number"),
        ("dqn", "lr", "fast", "dqn.lr='fast' is not valid; accepted: a number"),
        ("dqn", "double_q", "maybe", "accepted: true or false"),
        ("dqn", "gamma", "1.5", r"\[dqn\] gamma=1.5; accepted: a number in \[0, 1\]"),
        ("train", "precision", "fp8", "precision='fp8'; accepted: auto, fp32, bf16, fp16"),
        ("train", "env", "breakuot", "Closest valid names: breakout"),
        ("train", "device", "hipp", "Did you mean 'hip'"),
    ],
)
def test_bad_values_name_field_value_and_accepted(section, key, value, message):
    with pytest.raises((ConfigError, ValueError), match=message):
        apply_overrides(SECTIONS[section], section, {key: value})


def test_toml_round_trip(tmp_path):
    dqn = DQNConfig(lr=2e-4, hidden=(32,), double_q=False)
    text = to_toml({"train": TrainConfig(steps=123, run_name="x"), "dqn": dqn})
    path = tmp_path / "c.toml"
    path.write_text(text)
    loaded = load_toml(path, SECTIONS)
    assert apply_overrides(DQNConfig(), "dqn", loaded["dqn"]) == dqn
    assert apply_overrides(TrainConfig(), "train", loaded["train"]).steps == 123
    path.write_text("[dqnn]\nlr = 1\n")
    with pytest.raises(ConfigError, match=r"unknown table \[dqnn\]"):
        load_toml(path, SECTIONS)
    path.write_text("steps = = 3")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_toml(path, SECTIONS)
