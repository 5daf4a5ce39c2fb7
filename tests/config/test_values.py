"""Settings from text and TOML: types, the one-line error shape, and the checks every
section shares (finite floats, no negative ints) walked over every field of every section."""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing

import pytest

from rlamd.agents.dqn import DQNConfig
from rlamd.config import (
    INT_MINIMUMS,
    ConfigError,
    apply_overrides,
    check_fields,
    coerce,
    load_toml,
    parse_set,
    to_toml,
)
from rlamd.config.sections import SECTION_TYPES
from rlamd.envs import AtariConfig
from rlamd.train import TrainConfig, build_parser

SECTION_CLASSES: dict[str, type] = SECTION_TYPES
SECTIONS = {name: cls() for name, cls in SECTION_CLASSES.items()}
# One line, naming section.key and its value, then what is accepted.
ONE_LINE = re.compile(r"^[a-z_0-9]+\.[a-z_0-9]+=[^\n]+; accepted: [^\n]+$")


def _kind(hint: typing.Any) -> str:
    """``float``, ``int``, ``ints`` (a tuple of ints) or ``other`` for a field's type hint."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        return "ints" if typing.get_args(hint)[0] is int else "other"
    return {float: "float", int: "int"}.get(hint, "other")


def _fields(kinds: set[str]) -> list[tuple[str, str, str]]:
    """(section, field, kind) for every field of every section whose kind is in ``kinds``."""
    out = []
    for section, cls in SECTION_CLASSES.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            kind = _kind(hints[f.name])
            if kind in kinds:
                out.append((section, f.name, kind))
    return out


FLOATS = _fields({"float"})
INTS = _fields({"int", "ints"})


def test_the_walk_sees_every_numeric_field():
    # Every field is a kind the shared validator knows; a new kind (say list[float])
    # must be taught to check_fields before this passes again.
    for section, cls in SECTION_CLASSES.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            base = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
            assert _kind(hint) != "other" or base[0] in (bool, str), (section, f.name, hint)
    # every section has a float; train: checkpoint_minutes, env: step_timeout
    assert {s for s, _, _ in FLOATS} == set(SECTION_CLASSES)
    assert {s for s, _, _ in INTS} == set(SECTION_CLASSES)


def test_defaults_pass_the_shared_checks():
    for section, obj in SECTIONS.items():
        check_fields(obj, section)
        assert apply_overrides(obj, section, {}) == obj


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "NaN", "1e999"])
@pytest.mark.parametrize(("section", "key"), [(s, k) for s, k, _ in FLOATS])
def test_every_float_setting_refuses_non_finite_text(section, key, text):
    with pytest.raises(ConfigError) as err:
        apply_overrides(SECTIONS[section], section, {key: text})
    shown = repr(float(text))
    assert str(err.value) == f"{section}.{key}={shown}; accepted: a finite number"


@pytest.mark.parametrize(("section", "key"), [(s, k) for s, k, _ in FLOATS])
def test_every_float_setting_refuses_non_finite_toml(tmp_path, section, key):
    for literal in ("nan", "inf", "-inf"):
        path = tmp_path / "c.toml"
        path.write_text(f"[{section}]\n{key} = {literal}\n")
        loaded = load_toml(path, SECTIONS)
        with pytest.raises(ConfigError, match=ONE_LINE) as err:
            apply_overrides(SECTIONS[section], section, loaded[section])
        assert str(err.value).startswith(f"{section}.{key}={float(literal)!r};")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(("section", "key"), [(s, k) for s, k, _ in FLOATS])
def test_check_fields_refuses_non_finite_whatever_the_dataclass_allows(section, key, value):
    # Bypass __post_init__ (a frozen dataclass built in code): the shared validator alone.
    obj = SECTIONS[section]
    bad = dataclasses.replace(obj)
    object.__setattr__(bad, key, value)
    with pytest.raises(ConfigError) as err:
        check_fields(bad, section)
    assert str(err.value) == f"{section}.{key}={value!r}; accepted: a finite number"


@pytest.mark.parametrize(("section", "key", "kind"), INTS)
def test_every_int_setting_refuses_negative_values(section, key, kind):
    low = INT_MINIMUMS.get(f"{section}.{key}", 0)
    bad = low - 5
    with pytest.raises(ConfigError, match=ONE_LINE) as err:
        apply_overrides(SECTIONS[section], section, {key: str(bad)})
    shown = repr((bad,)) if kind == "ints" else str(bad)
    assert str(err.value).startswith(f"{section}.{key}={shown}")
    # and without the dataclass's own checks, the shared one says the same thing
    obj = dataclasses.replace(SECTIONS[section])
    object.__setattr__(obj, key, (64, bad) if kind == "ints" else bad)
    with pytest.raises(ConfigError) as err:
        check_fields(obj, section)
    what = "whole numbers" if kind == "ints" else "an integer"
    assert str(err.value) == f"{section}.{key}={getattr(obj, key)!r}; accepted: {what} >= {low}"


def test_documented_negative_ints_are_accepted_at_their_minimum():
    assert INT_MINIMUMS  # at least ray.max_worker_restarts (-1: always restart)
    for where, low in INT_MINIMUMS.items():
        section, key = where.split(".")
        assert low < 0
        assert getattr(apply_overrides(SECTIONS[section], section, {key: str(low)}), key) == low


def test_whole_numbers_are_read_exactly():
    big = 2**64 + 1  # through a float it would round to 2**64
    assert coerce("train", "seed", str(big), int) == big
    assert coerce("train", "seed", "1e6", int) == 1_000_000
    assert coerce("train", "steps", "2_000", int) == 2000
    with pytest.raises(ConfigError, match=r"^train\.steps='1\.5'; accepted: a whole number$"):
        coerce("train", "steps", "1.5", int)


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
    assert apply_overrides(DQNConfig(), "dqn", {"hidden": 32}).hidden == (32,)  # TOML scalar


@pytest.mark.parametrize(
    ("text", "want"),
    [("none", ()), ("", ()), ("[]", ()), ("[64, 32]", (64, 32)), ("(8,)", (8,)), ("16", (16,))],
)
def test_layer_sizes_read_as_the_checks_message_says(text, want):
    """The hidden-sizes rule says "none for a linear model": ``--set dqn.hidden=none`` is
    read so, as are the bracketed lists that Python and TOML print."""
    assert apply_overrides(DQNConfig(), "dqn", {"hidden": text}).hidden == want


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (
            ["dqn.lrr=1"],
            r"^dqn\.lrr='1' \(no such setting\); accepted: buffer_size, .*\. Did you mean dqn\.lr\?$",
        ),
        (
            ["dqm.lr=1"],
            r"^dqm\.lr='1' \(no section 'dqm'\); accepted: sections train, dqn, ppo, sac, td3, atari, env, ray\. Did you mean dqn\.lr\?$",
        ),
        (
            ["learnig_starts=5"],
            r"^learnig_starts='5' \(no such setting\); .*Did you mean dqn\.learning_starts or "
            r"sac\.learning_starts or td3\.learning_starts\?$",
        ),
        (["lr"], r"^--set 'lr'; accepted: SECTION\.KEY=VALUE"),
        (
            ["hidden=8"],
            r"^hidden='8' \(dqn, ppo, sac, td3 all have 'hidden'; say which\); accepted: dqn\.hidden "
            r"or ppo\.hidden or sac\.hidden or td3\.hidden$",
        ),
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
        ("train", "steps", "lots", r"^train\.steps='lots'; accepted: a whole number$"),
        ("dqn", "lr", "fast", r"^dqn\.lr='fast'; accepted: a number$"),
        ("dqn", "double_q", "maybe", r"^dqn\.double_q='maybe'; accepted: true or false$"),
        ("dqn", "gamma", "1.5", r"^dqn\.gamma=1\.5; accepted: a number in \[0, 1\]$"),
        ("ray", "num_learners", "0", r"^ray\.num_learners=0; accepted: an integer >= 1$"),
        (
            "train",
            "precision",
            "fp8",
            r"^train\.precision='fp8'; accepted: auto, fp32, bf16, fp16$",
        ),
        ("dqn", "lr", "-1", r"^dqn\.lr=-1\.0; accepted: a number > 0$"),
        ("dqn", "priority_eps", "0", r"^dqn\.priority_eps=0\.0; accepted: a number > 0$"),
        ("ppo", "clip_coef", "0", r"^ppo\.clip_coef=0\.0; accepted: a number > 0$"),
        ("train", "env", "breakuot", "Closest valid names: breakout"),
        ("train", "device", "hipp", "Did you mean 'hip'"),
    ],
)
def test_bad_values_name_section_key_value_and_accepted(section, key, value, message):
    with pytest.raises(ConfigError, match=message):
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
    with pytest.raises(
        ConfigError, match=r"unknown table \[dqnn\]; accepted: .*Did you mean \[dqn\]"
    ):
        load_toml(path, SECTIONS)
    path.write_text("steps = = 3")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_toml(path, SECTIONS)


def test_help_lists_every_setting_of_every_section():
    text = build_parser().format_help()
    for section, cls in SECTION_CLASSES.items():
        for f in dataclasses.fields(cls):
            assert f"{section}.{f.name} = " in text, f"{section}.{f.name} missing from --help"
    # and each with its docstring, inherited ones too (SAC's and TD3's replay settings)
    lines = {line.split(" = ")[0].strip(): line for line in text.splitlines() if " = " in line}
    blank = [key for key, line in lines.items() if line.rstrip().endswith(":")]
    assert not blank, f"settings without a description in --help: {blank}"
    assert "Polyak rate of the target networks" in lines["td3.tau"]
