"""``rlamd.sweep(...)``: a sweep from Python, as ``python -m rlamd.sweep`` runs it.

Example::

    import rlamd

    result = rlamd.sweep(
        "cartpole", algo="ppo", steps=20_000, seeds=5,
        grid={"ppo.lr": [3e-4, 1e-3]}, settings={"train.eval_every": 10_000},
    )
    print(result.table)              # per configuration: mean and IQM over the seeds, 95% CIs
    print(result.best_toml)          # python -m rlamd.train --config <that file>

Every trial gets ``ENV --algo ALGO --steps N`` and ``settings`` as ``--set`` items, its
configuration and seed; the checks are the command line's (:mod:`rlamd.sweep.driver`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .driver import plan, resume, run
from .report import best, groups, table
from .space import Base, parse_grid, parse_sample

__all__ = ["SweepResult", "sweep", "sweep_resume"]


@dataclass(frozen=True)
class SweepResult:
    """What a sweep left: its folder, status and table."""

    path: Path
    """The sweep folder (``sweep.json``, a run folder per trial, ``results.md``...)."""
    status: int
    """0 every trial finished; 1 a trial failed; 130 interrupted (resume it)."""
    table: str
    """The Markdown table per configuration."""
    best: str | None
    """The best configuration's id (``c00``...), None before any trial finished."""
    best_toml: Path | None
    """``best.toml``: the best configuration, runnable with ``--config``."""


def _text(value: Any) -> str:
    """A value as ``--set`` text (tuples as ``64,64``)."""
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_text(v) for v in value) + ")"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _result(status: int, path: Path, mode: str, seeds: int) -> SweepResult:
    gs = groups(path)
    chosen = best(gs, mode)
    toml = path / "best.toml"
    return SweepResult(
        path,
        status,
        table(gs, seeds),
        chosen.id if chosen else None,
        toml if toml.is_file() else None,
    )


def _trial_args(env, algo, steps, settings, config, logdir) -> tuple[list[str], Base]:
    """Each trial's ``rlamd.train`` arguments, and the same as a :class:`Base` to check."""
    flags: dict[str, Any] = {"env": env, "algo": algo, "logdir": logdir}
    argv = [env, "--algo", algo, "--logdir", logdir]
    if steps is not None:
        flags["steps"] = steps
        argv += ["--steps", str(int(steps))]
    sets = tuple(f"{k}={_text(v)}" for k, v in (settings or {}).items())
    if config:
        argv += ["--config", config]
    argv += [x for s in sets for x in ("--set", s)]
    return argv, Base({"train": flags}, config, sets)


def sweep(
    env: str,
    algo: str = "ppo",
    steps: int | None = None,
    *,
    seeds: int | Sequence[int] = 1,
    grid: Mapping[str, Sequence[Any]] | None = None,
    sample: Mapping[str, str] | None = None,
    samples: int = 1,
    search: str | None = None,
    scheduler: str = "none",
    metric: str = "score",
    mode: str = "max",
    grace_steps: int | None = None,
    settings: Mapping[str, Any] | None = None,
    config: str | None = None,
    cpus_per_trial: float = 1.0,
    gpus_per_trial: float = 0.0,
    max_concurrent: int | None = None,
    name: str | None = None,
    logdir: str = "runs",
    verbose: int = 1,
) -> SweepResult:
    """Run trials of ``algo`` on ``env`` over seeds and a search space; see the module.

    Args:
        grid: ``{"dqn.lr": [1e-4, 3e-4]}``: every combination is a configuration.
        sample: ``{"ppo.clip_coef": "uniform:0.1:0.3"}``; ``samples`` draws (random or
            Optuna search).
        settings: ``--set`` items for every trial (``{"train.eval_every": 10_000}``).
        the rest: as ``python -m rlamd.sweep --help`` says.

    Raises:
        rlamd.config.ConfigError: a refused setting, value or option (before any trial).
        rlamd.sweep.plan.SweepError: Ray is missing.
    """
    argv, base = _trial_args(env, algo, steps, settings, config, logdir)
    items = [f"{k}={','.join(_text(v) for v in vs)}" for k, vs in (grid or {}).items()]
    p = plan(
        argv,
        base,
        seeds=list(seeds) if not isinstance(seeds, int) else seeds,
        grid=parse_grid(items),
        sample=parse_sample([f"{k}={v}" for k, v in (sample or {}).items()]),
        samples=samples,
        search=search,
        scheduler=scheduler,
        metric=metric,
        mode=mode,
        grace_steps=grace_steps,
        cpus_per_trial=cpus_per_trial,
        gpus_per_trial=gpus_per_trial,
        max_concurrent=max_concurrent,
        name=name,
    )
    status, path = run(p, verbose)
    return _result(status, path, mode, len(p.job["seeds"]))


def sweep_resume(path: str | Path, verbose: int = 1) -> SweepResult:
    """Continue an interrupted sweep (finished trials kept, the others resumed)."""
    from .plan import load_plan

    p = load_plan(Path(path))
    status, where = resume(path, verbose)
    return _result(status, where, p.mode, len(p.job["seeds"]))
