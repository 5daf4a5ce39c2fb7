"""What a resumed run may change of its checkpoint's settings, and what it says it kept.

On ``--resume`` the checkpoint's saved settings are the base layer (:func:`resolve`);
flags, ``--config`` and ``--set`` may change the rest. Some settings cannot change: the
env, the algorithm, the env count and the seed (:data:`rlamd.config.layers.FIXED_ON_RESUME`,
checked by ``resolve``), and whatever shapes the saved network or the saved replay
(each algorithm's ``fixed_on_resume``, plus the Atari frame shape), checked here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlamd.algos import get_algorithm

from .errors import bad_setting
from .layout import family
from .sections import RunConfig

__all__ = ["check_resume", "keep_saved_replay_size", "replay_saved"]

NOT_SETTINGS = ("train.logdir", "train.run_name")
"""Saved settings that describe where a run started, not how it trains: a resumed run
writes into the folder it was given, wherever that is now."""

_ATARI_SHAPE = {"atari.frame_stack": "network", "atari.screen_size": "network"}
"""The observation's shape: the network's input and the replay's frames."""

_WHY = {
    "network": "the checkpoint's network was built with {old}",
    "replay": "the checkpoint's saved replay (--save-replay) was built with {old}",
}


def replay_saved(state: dict[str, Any]) -> bool:
    """Whether a checkpoint holds replay contents (a run with ``--save-replay``), not only
    the replay's configuration (``OffPolicyLoop.state_dict``)."""
    replay = state.get("replay")
    storage = replay.get("storage") if isinstance(replay, dict) else None
    return isinstance(storage, dict) and storage.get("contents") is not None


def keep_saved_replay_size(state: dict[str, Any], cfg: RunConfig) -> RunConfig:
    """``cfg`` with an automatically sized replay (``buffer_size`` none) set to the size of
    the replay the checkpoint holds (``--save-replay``).

    ``auto`` takes a share of the memory free when the replay is built; at a resume that
    is other memory (the loaded checkpoint itself holds the replay's contents), and a
    replay of another size cannot take the saved contents.
    """
    section = cfg.agent
    if not replay_saved(state) or getattr(section, "buffer_size", 0) is not None:
        return cfg
    size = int(state["replay"]["storage"]["capacity"])
    return dataclasses.replace(
        cfg, **{cfg.train.algo: dataclasses.replace(section, buffer_size=size)}
    )


def _value(cfg: RunConfig, key: str) -> Any:
    section, name = key.split(".", 1)
    return getattr(getattr(cfg, section), name)


def _shown(value: Any) -> str:
    return "none" if value is None else str(value)


def check_resume(
    saved: dict[str, dict[str, Any]], cfg: RunConfig, *, replay: bool, step: int = 0
) -> list[str]:
    """Refuse a change the checkpoint cannot take; return the settings that changed.

    Args:
        saved: the checkpoint's settings (``state["config"]``).
        cfg: the resolved settings of the resumed run.
        replay: whether the checkpoint holds its replay's contents (:func:`replay_saved`).
        step: the checkpoint's step (``train.steps`` must go past it: something to train).

    Returns:
        ``section.key OLD -> NEW`` for every setting that differs from the checkpoint's
        (where the run started is left out, see :data:`NOT_SETTINGS`).

    Raises:
        ConfigError: a setting that shapes the saved network or replay changed, e.g.
            ``dqn.hidden=(64, 64) (the checkpoint's network was built with (128, 128));
            accepted: (128, 128), the checkpoint's, or a new run``.
    """
    if cfg.train.steps <= step:
        raise bad_setting(
            "train",
            "steps",
            cfg.train.steps,
            f"an integer > {step} (--steps N: how far to train on)",
            why=f"the checkpoint is at step {step:,}: nothing is left to train",
        )
    old = RunConfig.from_dict(saved)
    fixed = dict(get_algorithm(cfg.train.algo).fixed_on_resume)
    if family(cfg) == "atari":
        fixed.update(_ATARI_SHAPE)
    for key, part in fixed.items():
        before, now = _value(old, key), _value(cfg, key)
        if now != before and (part == "network" or replay):
            section, name = key.split(".", 1)
            raise bad_setting(
                section,
                name,
                now,
                f"{_shown(before)}, the checkpoint's, or a new run",
                why=_WHY[part].format(old=_shown(before)),
            )
    changed, before_all = [], old.to_dict()
    for section, values in cfg.to_dict().items():
        for name, now in values.items():
            key, before = f"{section}.{name}", before_all[section][name]
            if key not in NOT_SETTINGS and now != before:
                changed.append(f"{key} {_shown(before)} -> {_shown(now)}")
    return changed
