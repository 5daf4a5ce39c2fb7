"""Resolving a run's settings: defaults, the algorithm's preset, a TOML file, flags, ``--set``.

Later layers win: the dataclass defaults (Atari's), the algorithm's preset for the env
family, ``--config FILE.toml``, the command-line flags, then ``--set section.key=value``.
The env and the algorithm (which choose the preset) may come from any of the later
layers: a saved ``config.toml`` names both, so ``--config RUN/config.toml`` alone runs.
On ``--resume`` the checkpoint's saved settings replace the defaults and the preset.
Everything is checked here, before any run folder exists.
"""

from __future__ import annotations

import sys
from typing import Any

from rlamd.algos import get_algorithm

from .checks import check_run
from .errors import ConfigError, bad_setting
from .sections import (
    ALGORITHM_SECTIONS,
    SECTION_TYPES,
    RunConfig,
    TrainConfig,
    move_keys,
    moved_note,
)
from .sources import load_toml, parse_set
from .values import apply_overrides, coerce_all

__all__ = ["FIXED_ON_RESUME", "resolve"]

FIXED_ON_RESUME = ("env", "algo", "num_envs", "seed")
"""Train settings a resumed run cannot change: the agent and replay depend on the first
three; the run's random streams continue from the checkpoint, so a new seed would only
reseed the envs (:mod:`rlamd.config.resume` checks what shapes the network and replay)."""

Layers = dict[str, dict[str, Any]]


def _merge(base: Layers, extra: Layers) -> None:
    for section, values in extra.items():
        base.setdefault(section, {}).update(values)


def _moved(layers: Layers, where: str, notes: bool = True) -> Layers:
    """``layers`` with settings named at their old place moved to their new one, and one
    line on stderr saying so (:data:`rlamd.config.sections.MOVED_KEYS`)."""
    layers = {section: dict(values) for section, values in layers.items()}
    found = move_keys(layers)
    if found and notes:
        print(moved_note(where, found), file=sys.stderr, flush=True)
    return layers


def _from_file(path: str, defaults: dict[str, Any]) -> Layers:
    """The settings of a ``--config`` file, each key and value checked on its own, so an
    error about one of them names the file as well as the setting."""
    where = f"--config {path}"
    layers = _moved(load_toml(path, defaults), where)
    try:
        for section, values in layers.items():
            coerce_all(SECTION_TYPES[section], section, values)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return layers


def _preset(given: Layers) -> Layers:
    """The preset of the algorithm and env family that the given layers name.

    Raises:
        ConfigError: no env named anywhere, or an unknown env or algorithm.
    """
    train = given.get("train", {})
    if "env" not in train:
        raise ConfigError(
            "no environment given; accepted: an env name (e.g. breakout, cartpole), "
            "--config FILE whose [train] table has env, or --resume RUN"
        )
    algo = get_algorithm(str(train.get("algo", TrainConfig.algo)))
    named = {k: train[k] for k in ("env", "env_module") if k in train}
    family = apply_overrides(TrainConfig(), "train", named).family
    return algo.presets.get(family, {})


def _algo_named(layers: list[Layers], sets: list[str]) -> str:
    """The algorithm the run trains, as far as the layers and ``--set`` items say (the
    last one naming it wins), for bare ``--set`` keys that several algorithms have."""
    algo = TrainConfig.algo
    for layer in layers:
        algo = layer.get("train", {}).get("algo", algo)
    for item in sets:
        key, _, value = item.partition("=")
        if key.strip() in ("algo", "train.algo"):
            algo = value.strip()
    return str(algo)


def _note_other_algorithms(layers: Layers, where: str, algo: str) -> None:
    """One line on stderr for settings of an algorithm the run does not train: only the
    run's own section is read, so ``--algo sac --set td3.lr=...`` would do nothing."""
    others = [
        f"{section}.{key}"
        for section, values in layers.items()
        if section in ALGORITHM_SECTIONS and section != algo
        for key in values
    ]
    if others:
        print(
            f"rlamd: note: {where}: {', '.join(others)} ignored: this run trains {algo}, which "
            f"reads only its own {algo}.* settings",
            file=sys.stderr,
            flush=True,
        )


def resolve(
    flags: Layers,
    *,
    config_file: str | None = None,
    sets: list[str] | None = None,
    saved: Layers | None = None,
    notes: bool = True,
) -> RunConfig:
    """The run's :class:`RunConfig`.

    Args:
        flags: values given by command-line flags, by section (``{"train": {...}, "ray": {...}}``).
        config_file: a TOML file of ``[section]`` tables.
        sets: ``--set section.key=value`` items.
        saved: a checkpoint's saved settings (on ``--resume``).
        notes: say on stderr what moved or is ignored (off for a sweep's repeated checks).

    Raises:
        ConfigError: any unknown key or invalid value, with what is accepted.
    """
    defaults = RunConfig().sections()
    given: Layers = {}
    if config_file:
        _merge(given, _from_file(config_file, defaults))
    _merge(given, _moved(flags, "settings", notes))  # rlamd.fit(settings=...) may name old places
    algo = _algo_named([saved or {}, given], sets or [])
    if algo not in ALGORITHM_SECTIONS:
        get_algorithm(algo)  # refused here, naming the nearest, before any bare key
    named = parse_set(sets or [], defaults, algo=algo, algorithms=ALGORITHM_SECTIONS)
    _merge(given, _moved(named, "--set", notes))
    if notes:
        _note_other_algorithms(flags, "settings", algo)
        _note_other_algorithms(named, "--set", algo)
    layers: Layers = {}
    _merge(layers, _moved(saved, "the checkpoint", notes) if saved is not None else _preset(given))
    _merge(layers, given)
    cfg = RunConfig(
        **{
            name: apply_overrides(kind(), name, layers.get(name, {}))
            for name, kind in SECTION_TYPES.items()
        }
    )
    check_run(cfg)
    if saved is not None:
        for key in FIXED_ON_RESUME:
            old, now = saved["train"][key], getattr(cfg.train, key)
            if str(now) != str(old):
                raise bad_setting(
                    "train",
                    key,
                    now,
                    f"{old!r}, the checkpoint's, or a new run",
                    why="--resume cannot change it",
                )
    return cfg
