"""What a run's settings imply about its layout: envs per learner, frames per observation.

Small pure functions of a resolved configuration (``cfg.train``, ``cfg.ray``, ...), shared
by the run-wide checks (:mod:`rlamd.config.checks`) and the algorithms' own checks
(``check`` of each :class:`rlamd.algos.base.Algorithm`).
"""

from __future__ import annotations

import math
from typing import Any

from .errors import bad_setting

__all__ = [
    "divisors",
    "envs_per_learner",
    "family",
    "frame_stack",
    "learners",
    "split_over_learners",
    "where_envs",
]


def family(cfg: Any) -> str:
    """The preset family of ``cfg.train.env``: ``atari``, ``classic``, ``continuous`` or
    ``pixels`` (:func:`rlamd.envs.env_family`)."""
    from rlamd.envs import env_family

    return env_family(cfg.train.env, cfg.train.env_module)


def frame_stack(cfg: Any) -> int:
    """Frames per observation the replay may store separately, at most (vectors: 1)."""
    from rlamd.envs import parse_env_id

    parsed = parse_env_id(cfg.train.env, cfg.train.env_module)
    if parsed.family == "atari":
        return cfg.atari.frame_stack
    return cfg.env.frame_stack if parsed.family == "gym" else 1


def learners(cfg: Any) -> int:
    """Learners sharing each batch (1 without Ray)."""
    return cfg.ray.num_learners if cfg.ray.enabled else 1


def envs_per_learner(cfg: Any) -> int:
    """Envs feeding the largest replay shard (or rollout share) of one learner."""
    if not cfg.ray.enabled:
        return cfg.train.num_envs
    rc = cfg.ray
    return math.ceil(rc.num_rollout_workers / rc.num_learners) * rc.envs_per_worker


def where_envs(cfg: Any) -> str:
    """How the envs of one learner come about, in words."""
    if not cfg.ray.enabled:
        return f"train.num_envs={cfg.train.num_envs} envs"
    rc = cfg.ray
    share = f" / ray.num_learners={rc.num_learners}" if rc.num_learners > 1 else ""
    return (
        f"ray.num_rollout_workers={rc.num_rollout_workers}{share} x "
        f"ray.envs_per_worker={rc.envs_per_worker} envs"
    )


def divisors(n: int, smallest: int) -> list[int]:
    """Divisors ``k`` of ``n`` with ``n // k >= smallest``."""
    return [k for k in range(1, n + 1) if n % k == 0 and n // k >= smallest]


def split_over_learners(cfg: Any, section: str, key: str, what: str) -> None:
    """Refuse ``section.key`` unless it is a multiple of the Ray learners (``what``: why
    it must split evenly), naming the next multiple up.

    Raises:
        ConfigError: in the one-line shape.
    """
    value, L = getattr(getattr(cfg, section), key), learners(cfg)
    if value % L:
        raise bad_setting(
            section,
            key,
            value,
            f"a multiple of ray.num_learners={L}",
            why=what,
            close=str(-(-value // L) * L),
        )
