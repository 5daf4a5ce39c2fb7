"""Rules over a whole run's settings, checked once they are resolved, before any work.

Each section's own ``__post_init__`` checks its fields one by one, and
:func:`rlamd.config.check_fields` adds what every section shares (finite floats, no
negative ints). What is left lives here: values that only make sense together (a batch
the replay can hold, minibatches that split a rollout evenly, a Ray layout the learners
can share), limits of the libraries below rlamd (ALE's 32-bit seeds, the Nature CNN's
smallest frame), and a device and precision that go together on this machine.

:func:`check_run` runs them all; each failure is a :class:`rlamd.config.ConfigError` in
the one-line shape ``SECTION.KEY=VALUE (WHY); accepted: WHAT``.

Example:
    >>> from rlamd.rules import check_run
    >>> check_run(cfg)  # cfg.train, cfg.dqn, cfg.ppo, cfg.atari, cfg.ray
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rlamd.config import bad_setting, check_fields
from rlamd.rules_device import check_device

__all__ = ["RULES", "SECTIONS", "check_device", "check_run"]

SECTIONS = ("train", "dqn", "ppo", "atari", "ray")
"""The sections a run's configuration has (attributes of the ``cfg`` every rule takes)."""

Rule = Callable[[Any], None]
RULES: dict[str, Rule] = {}
"""Every rule :func:`check_run` applies, by name, in order (device rules excepted: they
ask this machine, see :func:`check_device`)."""

ALE_SEED_LIMIT = 2**31 - 1
"""ale-py's vector env takes seeds as C ``int`` (measured: 2**31 fails, 2**31 - 1 works)."""
SEED_LIMIT = 2**32 - 1
"""Other envs: numpy's classic seed range (gymnasium and torch take more, but not all
tools do)."""
CNN_MIN_SCREEN = 36
"""The Nature CNN's smallest input side: 8x8 stride 4, 4x4 stride 2 and 3x3 stride 1
convolutions leave a 1x1 map at 36 pixels and nothing below."""
RAY_WORKER_SEED_STRIDE = 1_000
"""Ray rollout worker ``w`` seeds its envs from ``train.seed + 1000 * (w + 1)``
(:class:`rlamd.distributed.roles.RolloutWorker`)."""


def rule(fn: Rule) -> Rule:
    """Register ``fn`` in :data:`RULES` under its name."""
    RULES[fn.__name__] = fn
    return fn


def check_run(cfg: Any, *, device: bool = True, api: Any = None) -> None:
    """Check a resolved configuration: every section's fields, every rule, the device.

    Call it once the settings are resolved and before a run folder is created.

    Args:
        cfg: the run's configuration: ``cfg.train``, ``cfg.dqn``, ``cfg.ppo``,
            ``cfg.atari`` and ``cfg.ray`` are the sections' frozen dataclasses.
        device: also check the device and precision against this machine
            (:func:`check_device`); False checks the settings alone.
        api: a :class:`rlamd.device.TorchQueries` (tests pass a fake one).

    Raises:
        ConfigError: the first setting that breaks a rule, in the one-line shape.
    """
    for name in SECTIONS:
        check_fields(getattr(cfg, name), name)
    for check in RULES.values():
        check(cfg)
    if device:
        check_device(cfg, api=api)


# ---------------------------------------------------------------------- helpers
def _family(cfg: Any) -> str:
    from rlamd.envs import parse_env_id

    return parse_env_id(cfg.train.env).family


def _frame_stack(cfg: Any) -> int:
    """Frames per observation the replay stores separately (vectors: 1)."""
    return cfg.atari.frame_stack if _family(cfg) == "atari" else 1


def _learners(cfg: Any) -> int:
    return cfg.ray.num_learners if cfg.ray.enabled else 1


def _envs_per_learner(cfg: Any) -> int:
    """Envs feeding the largest replay shard (or rollout share) of one learner."""
    if not cfg.ray.enabled:
        return cfg.train.num_envs
    rc = cfg.ray
    return math.ceil(rc.num_rollout_workers / rc.num_learners) * rc.envs_per_worker


def _where_envs(cfg: Any) -> str:
    """How the envs of one learner come about, in words."""
    if not cfg.ray.enabled:
        return f"train.num_envs={cfg.train.num_envs} envs"
    rc = cfg.ray
    share = f" / ray.num_learners={rc.num_learners}" if rc.num_learners > 1 else ""
    return (
        f"ray.num_rollout_workers={rc.num_rollout_workers}{share} x "
        f"ray.envs_per_worker={rc.envs_per_worker} envs"
    )


# ---------------------------------------------------------------------- one section
@rule
def positive_clips(cfg: Any) -> None:
    """Gradient clips and Adam's epsilon are > 0; loss weights are >= 0.

    A negative norm clip turns every gradient around and a negative clamp makes
    ``clamp(-c, c)`` an empty range; torch refuses a negative Adam epsilon with a
    traceback, and 0 can divide by zero.
    """
    for section in ("dqn", "ppo"):
        obj = getattr(cfg, section)
        for key in ("max_grad_norm", "grad_clamp", "adam_eps"):
            if not getattr(obj, key) > 0:
                raise bad_setting(section, key, getattr(obj, key), "a number > 0")
    for key in ("vf_coef", "ent_coef"):
        if getattr(cfg.ppo, key) < 0:
            raise bad_setting("ppo", key, getattr(cfg.ppo, key), "a number >= 0")


@rule
def hidden_sizes(cfg: Any) -> None:
    """Every MLP layer has at least one unit (an empty list is a linear model)."""
    for section in ("dqn", "ppo"):
        hidden = getattr(cfg, section).hidden
        if any(h < 1 for h in hidden):
            raise bad_setting(
                section, "hidden", hidden, "layer sizes >= 1, e.g. 64,64 (none for a linear model)"
            )


@rule
def schedules_run_forward(cfg: Any) -> None:
    """Epsilon decays (``eps_end <= eps_start``) and beta anneals up (``beta_end >= beta_start``).

    The reverse is almost always two swapped values: exploration that grows over the
    run, or importance weights that correct less and less.
    """
    d = cfg.dqn
    if d.eps_end > d.eps_start:
        raise bad_setting(
            "dqn",
            "eps_end",
            d.eps_end,
            f"a number in [0, {d.eps_start}]",
            why=f"more than dqn.eps_start={d.eps_start}: exploration would grow",
        )
    if d.beta_end < d.beta_start:
        raise bad_setting(
            "dqn",
            "beta_end",
            d.beta_end,
            f"a number in [{d.beta_start}, 1]",
            why=f"less than dqn.beta_start={d.beta_start}: beta anneals towards 1",
        )


@rule
def atari_frames(cfg: Any) -> None:
    """The frame is big enough for the Nature CNN, and an episode lasts at least one step."""
    a = cfg.atari
    if a.screen_size < CNN_MIN_SCREEN:
        raise bad_setting(
            "atari",
            "screen_size",
            a.screen_size,
            f"an integer >= {CNN_MIN_SCREEN}",
            why="the Nature CNN's convolutions need at least 36x36 pixels",
        )
    if a.max_episode_frames < a.frame_skip:
        raise bad_setting(
            "atari",
            "max_episode_frames",
            a.max_episode_frames,
            f"an integer >= atari.frame_skip={a.frame_skip} (108000 is 30 minutes)",
            why="every episode would end after its first step",
        )


@rule
def seed_range(cfg: Any) -> None:
    """Every env seed a run derives from ``train.seed`` fits the env library.

    Env ``i`` of a single-process run resumed at step ``s`` gets ``seed + s + i``; env
    ``j`` of Ray worker ``w`` gets ``seed + 1000 (w + 1) + j``. ale-py takes C ``int``
    seeds; other envs are kept to numpy's classic 32-bit range.
    """
    t = cfg.train
    if cfg.ray.enabled:
        rc = cfg.ray
        spread = RAY_WORKER_SEED_STRIDE * rc.num_rollout_workers + rc.envs_per_worker
        how = "Ray worker w's env j gets seed + 1000 (w + 1) + j"
    else:
        spread = t.steps + t.num_envs
        how = "env i at step s gets seed + s + i"
    atari = _family(cfg) == "atari"
    limit = ALE_SEED_LIMIT if atari else SEED_LIMIT
    lib = "ale-py takes seeds up to 2**31 - 1" if atari else "seeds are kept below 2**32"
    top = max(0, limit - spread)
    if t.seed > top:
        raise bad_setting(
            "train", "seed", t.seed, f"an integer from 0 to {top}", why=f"{how}, and {lib}"
        )


# ---------------------------------------------------------------------- sizes that agree
@rule
def replay_holds_a_batch(cfg: Any) -> None:
    """DQN: every env gets enough replay records, and a (per-learner) batch fits in it.

    The replay splits ``dqn.buffer_size`` evenly over the envs feeding it (on Ray, over
    the learners first); each env keeps ``n_step + frame_stack - 1`` of its records
    unsampleable (their n-step window or frame stack is incomplete), so at most
    ``envs * (per_env - (n_step + frame_stack - 1))`` transitions can ever be sampled,
    and a larger batch would never start learning.
    """
    if cfg.train.algo != "dqn" or cfg.dqn.buffer_size is None:
        return  # auto: sized to the free memory when the replay is built
    d, L = cfg.dqn, _learners(cfg)
    envs, stack = _envs_per_learner(cfg), _frame_stack(cfg)
    shard = d.buffer_size // L
    per_env = shard // envs
    minimum = d.n_step + stack + 2
    if per_env < minimum:
        need = L * envs * minimum
        raise bad_setting(
            "dqn",
            "buffer_size",
            d.buffer_size,
            f"an integer >= {need}",
            why=f"{_where_envs(cfg)} need dqn.n_step + frame_stack + 2 = {minimum} records each",
        )
    holdback = d.n_step + stack - 1
    most = envs * (per_env - holdback)
    per_batch = d.batch_size // L
    if per_batch > most:
        shard_words = f"a shard of {shard:,}" if L > 1 else f"dqn.buffer_size {d.buffer_size:,}"
        each = (
            f"each of {L} learners samples dqn.batch_size / {L} = {per_batch:,} from "
            if L > 1
            else ""
        )
        raise bad_setting(
            "dqn",
            "batch_size",
            d.batch_size,
            f"an integer from 1 to {most * L:,}",
            why=f"{each}{shard_words} over {_where_envs(cfg)}, less n_step + frame_stack - 1 = "
            f"{holdback} per env, holds at most {most:,} sampleable transitions",
        )


def _divisors(n: int, smallest: int) -> list[int]:
    """Divisors ``k`` of ``n`` with ``n // k >= smallest``."""
    return [k for k in range(1, n + 1) if n % k == 0 and n // k >= smallest]


@rule
def ppo_minibatches_split_evenly(cfg: Any) -> None:
    """PPO: one rollout (per learner) splits into ``num_minibatches`` equal, non-empty parts.

    A remainder would be dropped from every epoch, and a minibatch of one row has no
    standard deviation to normalise advantages with (``norm_adv``).
    """
    if cfg.train.algo != "ppo":
        return
    p, L = cfg.ppo, _learners(cfg)
    if cfg.ray.enabled and cfg.ray.num_rollout_workers % L:
        return  # ray_layout says that, better
    rows = p.num_steps * _envs_per_learner(cfg)
    smallest = 2 if p.norm_adv and L == 1 else 1
    if rows % p.num_minibatches == 0 and rows // p.num_minibatches >= smallest:
        return
    ok = _divisors(rows, smallest)
    close = min(ok, key=lambda k: (abs(k - p.num_minibatches), -k)) if ok else None
    learner = " per learner" if L > 1 else ""
    raise bad_setting(
        "ppo",
        "num_minibatches",
        p.num_minibatches,
        f"a divisor of {rows} up to {max(ok) if ok else 1}",
        why=f"a rollout of ppo.num_steps={p.num_steps} x {_where_envs(cfg)} = {rows} rows"
        f"{learner} does not split into {p.num_minibatches} equal minibatches of "
        f"{smallest} or more",
        close=str(close) if close is not None else None,
    )


@rule
def ppo_steps_cover_a_rollout(cfg: Any) -> None:
    """PPO: the run is at least one rollout long (it learns once per rollout)."""
    if cfg.train.algo != "ppo":
        return
    envs = (
        cfg.ray.num_rollout_workers * cfg.ray.envs_per_worker
        if cfg.ray.enabled
        else cfg.train.num_envs
    )
    rollout = cfg.ppo.num_steps * envs
    if cfg.train.steps < rollout:
        where = (
            f"{cfg.ray.num_rollout_workers} workers x {cfg.ray.envs_per_worker} envs"
            if cfg.ray.enabled
            else f"{envs} envs"
        )
        raise bad_setting(
            "train",
            "steps",
            cfg.train.steps,
            f"an integer >= {rollout}",
            why=f"less than one PPO rollout of ppo.num_steps={cfg.ppo.num_steps} x {where}",
        )


@rule
def ray_layout(cfg: Any) -> None:
    """Ray: every learner has rollout workers of its own and an equal share of each batch.

    (These were checked in ``RayEngine.__init__``, after the engine had started.)
    """
    rc = cfg.ray
    if not rc.enabled:
        return
    W, L = rc.num_rollout_workers, rc.num_learners
    if W < L:
        raise bad_setting(
            "ray",
            "num_rollout_workers",
            W,
            f"an integer >= ray.num_learners={L}",
            why="every learner needs a rollout worker of its own",
        )
    if cfg.train.algo == "dqn" and cfg.dqn.batch_size % L:
        up = -(-cfg.dqn.batch_size // L) * L
        raise bad_setting(
            "dqn",
            "batch_size",
            cfg.dqn.batch_size,
            f"a multiple of ray.num_learners={L}",
            why="each learner takes an equal share of every batch",
            close=str(up),
        )
    if cfg.train.algo == "ppo" and W % L:
        up = -(-W // L) * L
        raise bad_setting(
            "ray",
            "num_rollout_workers",
            W,
            f"a multiple of ray.num_learners={L}",
            why="each PPO learner takes the rollouts of an equal number of workers",
            close=str(up),
        )


@rule
def ray_learner_gpus(cfg: Any) -> None:
    """Ray: ``ray.gpus_per_learner``, when given, agrees with ``train.device``."""
    rc = cfg.ray
    if not rc.enabled or rc.gpus_per_learner is None:
        return
    from rlamd.device import parse_device_spec

    kind, _ = parse_device_spec(cfg.train.device)
    gpus = rc.gpus_per_learner
    if gpus > 0 and kind in ("cpu", "mps"):
        raise bad_setting(
            "ray",
            "gpus_per_learner",
            gpus,
            f"0 with train.device={cfg.train.device!r}",
            why=f"train.device={cfg.train.device!r} keeps the learners off GPUs; "
            "or use --device auto",
        )
    if gpus == 0 and kind not in ("auto", "cpu"):
        raise bad_setting(
            "ray",
            "gpus_per_learner",
            gpus,
            "a number > 0 such as 1 or 0.5 (or --device cpu)",
            why=f"train.device={cfg.train.device!r} asks for a GPU",
        )
