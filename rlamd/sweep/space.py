"""What a sweep varies: seeds, a grid and sampled settings, checked before any trial starts.

``--grid dqn.lr=1e-4,3e-4`` gives a setting's values (commas inside parentheses belong
to a tuple value: ``--grid "ppo.hidden=(64,64),(256,256)"``); ``--sample
ppo.clip_coef=uniform:0.1:0.3`` draws it (``uniform:LOW:HIGH``, ``loguniform:LOW:HIGH``,
``int:LOW:HIGH`` with both ends included, ``choice:A,B,C``). Keys are ``--set`` names and
are read by :func:`rlamd.config.sources.parse_set`; every value and every configuration is
resolved by :func:`rlamd.config.layers.resolve`, as the trial's own ``rlamd.train`` will
resolve it, so a bad key or value is refused in rlamd's own words before anything runs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlamd.config import ConfigError, parse_set
from rlamd.config.errors import closest
from rlamd.config.layers import resolve
from rlamd.config.sections import RunConfig

__all__ = [
    "DISTRIBUTIONS",
    "OWNED",
    "Base",
    "Configuration",
    "Distribution",
    "configurations",
    "parse_grid",
    "parse_sample",
    "parse_seeds",
]

DISTRIBUTIONS = ("uniform", "loguniform", "int", "choice")
OWNED = {
    "train.seed": "--seeds",
    "train.run_name": "the sweep's trial names",
    "train.logdir": "--logdir (the sweep's folder is LOGDIR/NAME)",
}
"""Settings each trial gets from the sweep, which a grid, a sample or ``--set`` may not set."""


@dataclass(frozen=True)
class Base:
    """How every trial's settings resolve before the sweep's own: the trial's flags (by
    section, as ``rlamd.train`` reads them), its ``--config`` file and ``--set`` items."""

    flags: Mapping[str, Mapping[str, Any]]
    config_file: str | None = None
    sets: tuple[str, ...] = ()

    def resolve(self, extra: Sequence[str] = ()) -> RunConfig:
        """The run's settings with ``extra`` ``--set`` items after the trial's own."""
        flags = {k: dict(v) for k, v in self.flags.items()}
        # the base's own notes are said once (by the plan), not for each checked value
        return resolve(
            flags, config_file=self.config_file, sets=[*self.sets, *extra], notes=not extra
        )


@dataclass(frozen=True)
class Distribution:
    """One ``--sample`` setting: how its values are drawn."""

    kind: str
    args: tuple[Any, ...]

    def draw(self, rng: np.random.Generator) -> str:
        """One value, as ``--set`` text."""
        if self.kind == "choice":
            return str(self.args[int(rng.integers(len(self.args)))])
        low, high = self.args
        if self.kind == "int":
            return str(int(rng.integers(low, high + 1)))
        if self.kind == "loguniform":
            return repr(float(math.exp(rng.uniform(math.log(low), math.log(high)))))
        return repr(float(rng.uniform(low, high)))

    def ends(self) -> list[str]:
        """The values that bound the range (or every choice), to check before drawing."""
        return [str(a) for a in self.args]


@dataclass(frozen=True)
class Configuration:
    """One point of the search space: an id and the ``--set`` items it adds."""

    id: str
    settings: dict[str, str] = field(default_factory=dict)

    def sets(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.settings.items()]


def _full_key(key: str, value: str, flag: str) -> str:
    """``lr`` -> ``ppo.lr`` where one section has it; refuses what the sweep owns."""
    ((section, names),) = parse_set([f"{key}={value}"], RunConfig().sections()).items()
    full = f"{section}.{next(iter(names))}"
    if full in OWNED:
        raise ConfigError(
            f"{flag} {full}: the sweep sets it for each trial; accepted: {OWNED[full]}"
        )
    return full


def split_values(text: str) -> list[str]:
    """``1e-4,3e-4`` -> two values; ``(64,64),(128,128)`` -> two tuples."""
    values, depth, current = [], 0, ""
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            values.append(current.strip())
            current = ""
        else:
            current += ch
    values.append(current.strip())
    return [v for v in values if v]


def parse_grid(items: Sequence[str]) -> dict[str, list[str]]:
    """``["dqn.lr=1e-4,3e-4"]`` -> ``{"dqn.lr": ["1e-4", "3e-4"]}`` (keys checked)."""
    grid: dict[str, list[str]] = {}
    for item in items:
        key, sep, text = item.partition("=")
        values = split_values(text)
        if not sep or not key.strip() or not values:
            raise ConfigError(
                f"--grid {item!r}; accepted: SECTION.KEY=V1,V2,..., e.g. --grid dqn.lr=1e-4,3e-4"
            )
        full = _full_key(key.strip(), values[0], "--grid")
        if full in grid:
            raise ConfigError(f"--grid {full} is given twice; accepted: one --grid per setting")
        grid[full] = values
    return grid


def _distribution(key: str, text: str) -> Distribution:
    kind, _, rest = text.partition(":")
    usage = (
        f"--sample {key}={text!r}; accepted: uniform:LOW:HIGH, loguniform:LOW:HIGH, "
        "int:LOW:HIGH or choice:A,B,..."
    )
    if kind not in DISTRIBUTIONS:
        close = closest(kind, DISTRIBUTIONS)
        raise ConfigError(usage + (f". Did you mean {close}?" if close else ""))
    if kind == "choice":
        choices = tuple(split_values(rest))
        if not choices:
            raise ConfigError(usage)
        return Distribution(kind, choices)
    parts = rest.split(":")
    try:
        low, high = (int(p) if kind == "int" else float(p) for p in parts)
    except ValueError:
        raise ConfigError(usage) from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ConfigError(f"{usage}, with LOW < HIGH, both finite")
    if kind == "loguniform" and low <= 0:
        raise ConfigError(f"{usage}, with 0 < LOW for loguniform")
    return Distribution(kind, (low, high))


def parse_sample(items: Sequence[str]) -> dict[str, Distribution]:
    """``["ppo.clip_coef=uniform:0.1:0.3"]`` -> ``{"ppo.clip_coef": Distribution(...)}``."""
    out: dict[str, Distribution] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"--sample {item!r}; accepted: SECTION.KEY=DIST, e.g. "
                "--sample ppo.clip_coef=uniform:0.1:0.3"
            )
        dist = _distribution(key.strip(), text.strip())
        full = _full_key(key.strip(), dist.ends()[0], "--sample")
        if full in out:
            raise ConfigError(f"--sample {full} is given twice; accepted: one per setting")
        out[full] = dist
    return out


def parse_seeds(text: str | int | Sequence[int], first: int) -> list[int]:
    """``5`` -> five seeds from ``first``; ``"1,2,7"`` (or a list) -> those seeds."""
    usage = "accepted: a count N >= 1 (seeds FIRST..FIRST+N-1) or a list such as 1,2,7"
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        seeds = list(text)
    else:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        try:
            numbers = [int(p) for p in parts]
        except ValueError:
            raise ConfigError(f"--seeds {text!r}; {usage}") from None
        if len(numbers) == 1 and "," not in text:
            if numbers[0] < 1:
                raise ConfigError(f"--seeds {text!r}; {usage}")
            numbers = list(range(first, first + numbers[0]))
        seeds = numbers
    if not seeds or any(not isinstance(s, int) or s < 0 for s in seeds):
        raise ConfigError(f"--seeds {text!r}; {usage} (seeds >= 0)")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {text!r} repeats a seed; {usage}")
    return seeds


def _checked(base: Base, sets: list[str], flag: str) -> None:
    try:
        base.resolve(sets)
    except ConfigError as exc:
        raise ConfigError(f"{flag} {' '.join(sets)}: {exc}") from None


def configurations(
    base: Base,
    grid: Mapping[str, Sequence[str]],
    sample: Mapping[str, Distribution],
    samples: int = 1,
    seed: int = 0,
) -> list[Configuration]:
    """Every configuration a grid or random search runs (each with every seed), checked.

    The grid's product, times ``samples`` draws of the sampled settings (a seeded draw:
    the same sweep draws the same values). Each value, then each configuration, is resolved
    as its trial will resolve it.

    Raises:
        ConfigError: a value or a combination rlamd refuses, naming the flag and the key.
    """
    if samples < 1:
        raise ConfigError(f"--samples {samples}; accepted: an integer >= 1")
    for key, values in grid.items():
        for v in values:
            _checked(base, [f"{key}={v}"], "--grid")
    for key, dist in sample.items():
        for v in dist.ends():
            _checked(base, [f"{key}={v}"], "--sample")
    rng = np.random.default_rng(seed)
    points = [dict(zip(grid, combo, strict=True)) for combo in itertools.product(*grid.values())]
    out: list[Configuration] = []
    width = max(2, len(str(len(points) * samples - 1)))
    for _ in range(samples if sample else 1):
        drawn = {k: d.draw(rng) for k, d in sample.items()}
        for point in points:
            cfg = Configuration(f"c{len(out):0{width}d}", {**point, **drawn})
            _checked(base, cfg.sets(), "--grid/--sample" if sample else "--grid")
            out.append(cfg)
    return out
