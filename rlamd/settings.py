"""Resolving a run's settings: defaults, presets, a TOML file, flags and ``--set``.

Later layers win: the dataclass defaults (Atari's), the algorithm's preset for the env
family, ``--config FILE.toml``, the command-line flags, then ``--set section.key=value``.
On ``--resume`` the checkpoint's saved settings replace the defaults and the preset.
Everything is checked here, before any run folder exists.
"""

from __future__ import annotations

from typing import Any

from rlamd.algos import get_algorithm
from rlamd.config import apply_overrides, bad_setting, load_toml, parse_set
from rlamd.rules import check_run
from rlamd.runconfig import SECTION_TYPES, RunConfig, TrainConfig

__all__ = ["FIXED_ON_RESUME", "resolve"]

FIXED_ON_RESUME = ("env", "algo", "num_envs")
"""Train settings a resumed run cannot change (the agent and replay depend on them)."""

Layers = dict[str, dict[str, Any]]


def _merge(base: Layers, extra: Layers) -> None:
    for section, values in extra.items():
        base.setdefault(section, {}).update(values)


def resolve(
    flags: Layers,
    *,
    config_file: str | None = None,
    sets: list[str] | None = None,
    saved: Layers | None = None,
) -> RunConfig:
    """The run's :class:`RunConfig`.

    Args:
        flags: values given by command-line flags, by section (``{"train": {...}, "ray": {...}}``).
        config_file: a TOML file of ``[section]`` tables.
        sets: ``--set section.key=value`` items.
        saved: a checkpoint's saved settings (on ``--resume``).

    Raises:
        ConfigError: any unknown key or invalid value, with what is accepted.
    """
    defaults = RunConfig().sections()
    layers: Layers = {}
    if saved is not None:
        _merge(layers, saved)
    else:
        train = flags.get("train", {})
        algo = get_algorithm(str(train.get("algo", TrainConfig.algo)))
        family = apply_overrides(
            TrainConfig(), "train", {"env": train.get("env", "breakout")}
        ).family
        _merge(layers, algo.presets.get(family, {}))
    if config_file:
        _merge(layers, load_toml(config_file, defaults))
    _merge(layers, flags)
    _merge(layers, parse_set(sets or [], defaults))
    cfg = RunConfig(
        **{
            name: apply_overrides(kind(), name, layers.get(name, {}))
            for name, kind in SECTION_TYPES.items()
        }
    )
    get_algorithm(cfg.train.algo)
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
