"""The run-wide checks of a resolved configuration, before any work.

Each section's own ``__post_init__`` checks its fields one by one, and
:func:`rlamd.config.values.check_fields` adds what every section shares (finite floats, no
negative ints) as each section is built. What is left lives here: values that only make
sense together (a Ray layout, seeds over all envs), limits of the libraries below
rlamd (ALE's 32-bit seeds, the Nature CNN's smallest frame), what every algorithm's
section shares (positive clips, non-empty layers: each registered section that has the
field), and, in
:mod:`rlamd.config.device_checks`, a device and precision that go together on this
machine. What an algorithm needs of the settings (a batch its replay can hold, minibatches
that split a rollout evenly, schedules that run forward) is that algorithm's own ``check`` (``rlamd.algos``), which
:func:`check_run` calls: no check here branches on the algorithm's name.

Each failure is a :class:`rlamd.config.errors.ConfigError` in the one-line shape
``SECTION.KEY=VALUE (WHY); accepted: WHAT``.

Example:
    >>> from rlamd.config.checks import check_run
    >>> check_run(cfg)  # cfg.train, cfg.atari, cfg.ray, each algorithm's section
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .device_checks import check_device
from .errors import bad_setting
from .layout import family
from .sections import ALGORITHM_SECTIONS

__all__ = ["RULES", "check_device", "check_run"]

Rule = Callable[[Any], None]
RULES: dict[str, Rule] = {}
"""Every run-wide rule :func:`check_run` applies, by name, in order (device rules excepted:
they ask this machine, see :func:`check_device`)."""

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
    """Check a resolved configuration: the run-wide rules, the algorithm's own, the device.

    Call it once the settings are resolved and before a run folder is created. (Each
    section's field checks ran when it was built.)

    Args:
        cfg: the run's configuration: ``cfg.train``, ``cfg.atari``, ``cfg.ray`` and
            each registered algorithm's section (``cfg.NAME``) are frozen dataclasses.
        device: also check the device and precision against this machine
            (:func:`check_device`); False checks the settings alone.
        api: a :class:`rlamd.device.TorchQueries` (tests pass a fake one).

    Raises:
        ConfigError: the first setting that breaks a rule, in the one-line shape.
    """
    from rlamd.algos import get_algorithm

    for check in RULES.values():
        check(cfg)
    get_algorithm(cfg.train.algo).check(cfg)
    if device:
        check_device(cfg, api=api)


def _algorithm_sections(cfg: Any) -> list[tuple[str, Any]]:
    """``(name, section)`` of every registered algorithm's section in ``cfg``."""
    return [(name, getattr(cfg, name)) for name in ALGORITHM_SECTIONS]


OPTIMIZER_CLIPS = ("max_grad_norm", "grad_clamp", "adam_eps")
"""Fields an algorithm's section may have that must be > 0 wherever they are
(:func:`rlamd.algos.base.build_learner` hands the clips to :class:`rlamd.precision.Precision`)."""


@rule
def positive_clips(cfg: Any) -> None:
    """Gradient clips and Adam's epsilon, in every algorithm's section that has them, are > 0
    (a clip may be none where its section allows it: no clipping).

    A negative norm clip turns every gradient around and a negative clamp makes
    ``clamp(-c, c)`` an empty range; torch refuses a negative Adam epsilon with a
    traceback, and 0 can divide by zero.
    """
    for section, obj in _algorithm_sections(cfg):
        for key in OPTIMIZER_CLIPS:
            value = getattr(obj, key, 1.0)
            if value is not None and not value > 0:
                raise bad_setting(section, key, getattr(obj, key), "a number > 0")


@rule
def beta_anneals_up(cfg: Any) -> None:
    """A prioritized replay's importance-sampling exponent anneals up (``beta_end >=
    beta_start``), in every algorithm's section that has one: the reverse is almost always
    two swapped values, weights that correct less and less over the run."""
    for section, obj in _algorithm_sections(cfg):
        start, end = getattr(obj, "beta_start", None), getattr(obj, "beta_end", None)
        if start is not None and end is not None and end < start:
            raise bad_setting(
                section,
                "beta_end",
                end,
                f"a number in [{start}, 1]",
                why=f"less than {section}.beta_start={start}: beta anneals towards 1",
            )


@rule
def hidden_sizes(cfg: Any) -> None:
    """Every MLP layer (an algorithm section's ``hidden``) has at least one unit (an empty
    list is a linear model)."""
    for section, obj in _algorithm_sections(cfg):
        hidden = getattr(obj, "hidden", ())
        if any(h < 1 for h in hidden):
            raise bad_setting(
                section, "hidden", hidden, "layer sizes >= 1, e.g. 64,64 (none for a linear model)"
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
    atari = family(cfg) == "atari"
    limit = ALE_SEED_LIMIT if atari else SEED_LIMIT
    lib = "ale-py takes seeds up to 2**31 - 1" if atari else "seeds are kept below 2**32"
    top = max(0, limit - spread)
    if t.seed > top:
        raise bad_setting(
            "train", "seed", t.seed, f"an integer from 0 to {top}", why=f"{how}, and {lib}"
        )


# ---------------------------------------------------------------------- Ray
@rule
def ray_workers_per_learner(cfg: Any) -> None:
    """Ray: every learner has rollout workers of its own."""
    rc = cfg.ray
    if rc.enabled and rc.num_rollout_workers < rc.num_learners:
        raise bad_setting(
            "ray",
            "num_rollout_workers",
            rc.num_rollout_workers,
            f"an integer >= ray.num_learners={rc.num_learners}",
            why="every learner needs a rollout worker of its own",
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
