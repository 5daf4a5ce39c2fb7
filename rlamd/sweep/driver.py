"""The sweep's driver: check everything, claim the sweep's folder, run the trials on Tune.

A sweep folder, ``LOGDIR/NAME/``, holds ``sweep.json`` (what the sweep runs: every
trial's ``rlamd.train`` arguments, its configurations and seeds, the search, the
scheduler and the resources), one ordinary run folder per trial (``c00_s1/``...), Tune's
experiment state (``tune/``) and, at the end, the report (:mod:`rlamd.sweep.report`).
A new sweep claims a fresh folder (:func:`rlamd.rundir.claim`: a taken name gets ``-2``);
``--resume`` holds the one it names. Either takes the folder's lock for as long as the
driver runs, so two drivers never run one sweep, and a resumed sweep runs what its
``sweep.json`` says, nothing given anew: two sweeps never mix in one folder.

Resuming restores Tune's experiment (``Tuner.restore``: finished trials are kept, the
others start again) and each unfinished trial continues its run from its
``checkpoint.pt`` (``rlamd.train --resume``, :mod:`rlamd.sweep.trial`).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rlamd.algos import PLUGINS_VARIABLE
from rlamd.config import ConfigError, parse_set
from rlamd.config.errors import closest
from rlamd.config.sections import ALGORITHM_SECTIONS, RunConfig
from rlamd.distributed.plan import set_variables
from rlamd.envs import parse_env_id
from rlamd.rundir import RunFolder, claim, hold
from rlamd.storage import write_text_atomic
from rlamd.threads import ray_cpus

from .plan import SPEC, TUNE_DIR, Plan, SweepError, load_plan
from .space import OWNED, Base, Distribution, configurations, parse_seeds
from .trial import METRICS, TrialFailed, run_trial, trial_name

__all__ = ["SEARCHES", "Plan", "SweepError", "plan", "resume", "run"]

SEARCHES = ("grid", "random", "optuna")
SCHEDULERS = ("none", "asha")
INSTALL = "install it with `bash scripts/setup.sh --ray`"


def _choose(flag: str, value: str, accepted: tuple[str, ...]) -> str:
    if value not in accepted:
        close = closest(value, accepted)
        hint = f". Did you mean {close}?" if close else ""
        raise ConfigError(f"{flag} {value!r}; accepted: {', '.join(accepted)}{hint}")
    return value


def _check_owned(base: Base, algo: str) -> None:
    """Refuse ``--set`` items and flags for what the sweep sets in each trial."""
    sections = RunConfig().sections()
    given = parse_set(list(base.sets), sections, algo=algo, algorithms=ALGORITHM_SECTIONS)
    for section, names in given.items():
        for name in names:
            if f"{section}.{name}" in OWNED:
                raise ConfigError(
                    f"--set {section}.{name}: the sweep sets it for each trial; accepted: "
                    f"{OWNED[f'{section}.{name}']}"
                )
    if base.flags.get("train", {}).get("run_name"):
        raise ConfigError("--run-name: each trial's folder is named by the sweep; accepted: --name")


def _check_options(cfg, sampled: bool, search, scheduler, metric, mode) -> str:
    """The search (chosen from what is given) once the options are checked."""
    if cfg.ray.enabled:
        raise ConfigError("--ray: each trial is one process on Ray Tune; accepted: no --ray")
    search = _choose("--search", search or ("random" if sampled else "grid"), SEARCHES)
    if search == "grid" and sampled:
        raise ConfigError("--sample with --search grid; accepted: --search random or optuna")
    _choose("--scheduler", scheduler, SCHEDULERS)
    _choose("--metric", metric, METRICS)
    _choose("--mode", mode, ("max", "min"))
    if search == "optuna" and importlib.util.find_spec("optuna") is None:
        raise ConfigError(
            "--search optuna needs the optuna package; install it with `bash "
            "scripts/setup.sh --ray --tune` (or pip install 'rlamd[tune]')"
        )
    return search


def plan(
    argv: list[str],
    base: Base,
    *,
    seeds: str | int | list[int] = 1,
    grid: dict[str, list[str]] | None = None,
    sample: dict[str, Distribution] | None = None,
    samples: int = 1,
    search: str | None = None,
    scheduler: str = "none",
    metric: str = "score",
    mode: str = "max",
    grace_steps: int | None = None,
    cpus_per_trial: float = 1.0,
    gpus_per_trial: float = 0.0,
    max_concurrent: int | None = None,
    name: str | None = None,
    sample_seed: int = 0,
) -> Plan:
    """Check a sweep and say what it runs (nothing written, no Ray needed).

    Raises: ConfigError: a bad setting, grid or sample value, option or resource.
    """
    grid, sample = grid or {}, sample or {}
    cfg = base.resolve()
    _check_owned(base, cfg.train.algo)
    search = _check_options(cfg, bool(sample), search, scheduler, metric, mode)
    _check_resources(cpus_per_trial, gpus_per_trial)
    seed_list = parse_seeds(seeds, cfg.train.seed)
    # Optuna draws its own values: one configuration here checks every value given
    drawn = configurations(base, grid, sample, 1 if search == "optuna" else samples, sample_seed)
    configs = [] if search == "optuna" else [asdict(c) for c in drawn]
    steps = cfg.train.steps
    grace = grace_steps if grace_steps is not None else max(1, steps // 16)
    if scheduler == "asha" and not 0 < grace < steps:
        raise ConfigError(f"--grace-steps {grace}; accepted: 1 to {steps - 1} (below --steps)")
    slug = parse_env_id(cfg.train.env, cfg.train.env_module).slug
    job = {  # what each trial reads (rlamd.sweep.trial)
        "argv": list(argv),
        "seeds": seed_list,
        "configurations": configs,
        "threads": None if cfg.train.threads else ray_cpus({"CPU": cpus_per_trial}),
        "eval_episodes": cfg.train.eval_episodes,
        "cwd": str(Path.cwd()),
        "python": sys.executable,
        "env_vars": set_variables((PLUGINS_VARIABLE,)),  # for trials on other nodes
    }
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Plan(
        job=job, search=search, samples=samples, grid=dict(grid),
        sample={k: [d.kind, *d.args] for k, d in sample.items()},
        scheduler=scheduler, metric=metric, mode=mode, grace_steps=grace, steps=steps,
        cpus_per_trial=cpus_per_trial, gpus_per_trial=gpus_per_trial,
        max_concurrent=max_concurrent, logdir=cfg.train.logdir,
        name=name or f"{slug}_{cfg.train.algo}_sweep_{stamp}",
    )  # fmt: skip


def _check_resources(cpus_per_trial: float, gpus_per_trial: float) -> None:
    for flag, value, low in (
        ("--cpus-per-trial", cpus_per_trial, 0.01),
        ("--gpus-per-trial", gpus_per_trial, 0.0),
    ):
        if not (value >= low and value == value):
            raise ConfigError(f"{flag} {value!r}; accepted: a number >= {low}")


def _ray():
    if importlib.util.find_spec("ray") is None or importlib.util.find_spec("ray.tune") is None:
        raise SweepError(
            f"rlamd sweep runs its trials on Ray Tune, which this Python does not have; {INSTALL}"
        )
    # A pointer checkpoint per rlamd checkpoint forces Tune's state snapshots (cheap
    # here: the pointer is a few bytes); Tune's warning about their rate says nothing.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    import ray
    from ray import tune

    return ray, tune


def _run_config(tune, sweep_dir: Path, plan_: Plan, verbose: int):
    """``RunConfig`` and friends from ``ray.tune`` (2.41+) or ``ray.train`` (2.7-2.40)."""
    if hasattr(tune, "RunConfig"):
        ns = tune
    else:  # pragma: no cover - older Ray
        from ray import train as ns
    return ns.RunConfig(
        name=TUNE_DIR,
        storage_path=str(sweep_dir),
        failure_config=ns.FailureConfig(max_failures=0),
        checkpoint_config=ns.CheckpointConfig(num_to_keep=1),
        verbose=verbose,
    )


def _space(tune, plan_: Plan) -> tuple[dict[str, Any], Any, int]:
    """Tune's param space, search algorithm and sample count for the plan."""
    job = plan_.job
    if plan_.search != "optuna":
        space = {
            "job": job,
            "configuration": tune.grid_search(list(range(len(job["configurations"])))),
            "seed": tune.grid_search(job["seeds"]),
        }
        return space, None, 1
    from ray.tune.search import Repeater
    from ray.tune.search.optuna import OptunaSearch

    domains: dict[str, Any] = {k: tune.choice(v) for k, v in plan_.grid.items()}
    for key, (kind, *args) in plan_.sample.items():
        domains[key] = _domain(tune, kind, args)
    searcher = Repeater(OptunaSearch(seed=0), repeat=len(job["seeds"]), set_index=True)
    return {"job": job, "settings": domains}, searcher, plan_.samples * len(job["seeds"])


def _domain(tune, kind: str, args: list):
    """A ``--sample`` distribution as Tune's search domain (for Optuna)."""
    if kind == "int":
        return tune.randint(args[0], args[1] + 1)  # Tune's upper end is excluded
    if kind == "choice":
        return tune.choice(list(args))
    return {"uniform": tune.uniform, "loguniform": tune.loguniform}[kind](*args)


def _trainable(tune, plan_: Plan):
    resources = {"cpu": plan_.cpus_per_trial, "gpu": plan_.gpus_per_trial}
    return tune.with_resources(run_trial, resources)


def _tuner(tune, plan_: Plan, sweep_dir: Path, verbose: int):
    """A new Tuner, or the sweep's own restored where Tune saved its state."""
    trainable = _trainable(tune, plan_)
    path = sweep_dir / TUNE_DIR
    if path.is_dir() and tune.Tuner.can_restore(str(path)):
        return tune.Tuner.restore(str(path), trainable, resume_unfinished=True, resume_errored=True)
    space, searcher, num_samples = _space(tune, plan_)
    tune_config = tune.TuneConfig(
        metric=plan_.metric,
        mode=plan_.mode,
        search_alg=searcher,
        scheduler=scheduler(plan_),
        num_samples=num_samples,
        max_concurrent_trials=plan_.max_concurrent,
        trial_name_creator=lambda t: trial_name(t.config),
        trial_dirname_creator=lambda t: trial_name(t.config),
    )
    return tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune_config,
        run_config=_run_config(tune, sweep_dir, plan_, verbose),
    )


def scheduler(plan_: Plan):
    """ASHA for ``--scheduler asha`` (None otherwise). A trial ends itself at ``--steps``,
    after its final evaluation: ASHA's rungs lie below that step (``max_t`` one short of
    it) and ASHA does not stop a trial for reaching ``max_t``, which would race with that
    evaluation and leave a finished trial without its result."""
    if plan_.scheduler != "asha":
        return None
    from ray.tune.schedulers import ASHAScheduler

    return ASHAScheduler(
        time_attr="env_steps",
        max_t=max(plan_.grace_steps, plan_.steps - 1),
        grace_period=plan_.grace_steps,
        stop_last_trials=False,
    )


def _fit(plan_: Plan, folder: RunFolder, verbose: int) -> int:
    """Run the trials; then the report. Returns 0, 1 (a trial failed) or 130."""
    ray, tune = _ray()
    started = not ray.is_initialized()
    if started:
        try:
            # RAY_ADDRESS (a `ray job submit` job): that cluster. Otherwise a Ray of its own,
            # never one that happens to run on this node (another user's, a killed sweep's).
            kwargs = {"include_dashboard": False, "configure_logging": False}
            kwargs["log_to_driver"] = verbose > 1
            if os.environ.get("RAY_ADDRESS"):
                ray.init(**kwargs)
            else:
                from rlamd.distributed.local import start_local

                start_local(ray, **kwargs)
        except Exception as exc:  # a local Ray that could not start (an overloaded machine)
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SweepError(
                f"Ray did not start: {first}. Nothing ran; try again with: python -m "
                f"rlamd.sweep --resume {folder.path}"
            ) from None
    sweep_dir = folder.path
    print(f"rlamd: sweep of {plan_.trials} trials -> {sweep_dir}", flush=True)
    status = 0
    try:
        results = _tuner(tune, plan_, sweep_dir, verbose).fit()
        failed = [r for r in results if r.error is not None]
        for r in failed:
            text = str(r.error)
            mark = text.rfind(f"{TrialFailed.__name__}: ")
            text = text[mark + len(TrialFailed.__name__) + 2 :] if mark >= 0 else text
            print(f"rlamd: trial failed: {text}", file=sys.stderr, flush=True)
        # an interrupted experiment returns with trials unmade, or neither terminated nor
        # errored; or, without a scheduler to stop them early, with trials not done
        ended = results.num_terminated + results.num_errors
        cut = ended < len(results) or len(results) < plan_.trials
        status = 130 if cut else (1 if failed else 0)
        if not cut and plan_.scheduler != "none":
            from .report import mark_stopped_early

            mark_stopped_early(sweep_dir, plan_.scheduler)
    except KeyboardInterrupt:
        status = 130
    finally:
        if started:
            ray.shutdown()
    from .report import write_report

    done = write_report(sweep_dir, out=sys.stdout)
    if plan_.scheduler == "none" and status == 0 and done < plan_.trials:
        status = 130
    if status:
        what = "interrupted" if status == 130 else "some trials failed (above)"
        print(
            f"rlamd: {what}; {done} of {plan_.trials} trials finished. Continue (the failed "
            f"and unfinished ones) with: python -m rlamd.sweep --resume {sweep_dir}",
            flush=True,
        )
    return status


def run(plan_: Plan, verbose: int = 1) -> tuple[int, Path]:
    """Run a new sweep in a fresh folder; returns (status, sweep folder)."""
    _ray()  # before a folder is made: without Ray there is nothing to run
    folder = claim(Path(plan_.logdir), plan_.name)
    try:
        plan_.name = folder.path.name
        plan_.job["sweep_dir"] = str(folder.path.resolve())
        write_text_atomic(folder.path / SPEC, json.dumps(asdict(plan_), indent=1) + "\n")
        return _fit(plan_, folder, verbose), folder.path
    finally:
        folder.release()


def _moved_here(plan_: Plan, path: Path) -> None:
    """A sweep folder moved (or copied) since it was made: Tune's saved state names the old
    place, and its trials would write there. So Tune's state is set aside and the plan runs
    again here, where every trial keeps what its run folder holds (finished trials report
    their result, the others resume from their checkpoints). Optuna's suggestions live only
    in that state: such a sweep resumes only where it was made."""
    made = plan_.job["sweep_dir"]
    if plan_.search == "optuna":
        raise SweepError(
            f"this Optuna sweep was made in {made}; Optuna's suggestions are kept in Tune's "
            f"state for that folder, so it resumes only there: move it back, then "
            f"python -m rlamd.sweep --resume {made}"
        )
    if (path / TUNE_DIR).exists():
        n = next(i for i in itertools.count(1) if not (path / f"{TUNE_DIR}.moved-{i}").exists())
        (path / TUNE_DIR).rename(path / f"{TUNE_DIR}.moved-{n}")
    plan_.job["sweep_dir"] = str(path.resolve())
    write_text_atomic(path / SPEC, json.dumps(asdict(plan_), indent=1) + "\n")
    print(f"rlamd: this sweep was made in {made}; it goes on here", flush=True)


def resume(sweep_dir: str | Path, verbose: int = 1) -> tuple[int, Path]:
    """Continue a sweep: finished trials kept, the others resumed from their checkpoints."""
    path = Path(sweep_dir)
    plan_ = load_plan(path)
    _ray()
    folder = hold(path)
    try:
        if Path(plan_.job["sweep_dir"]).resolve() != path.resolve():
            _moved_here(plan_, path)
        return _fit(plan_, folder, verbose), path
    finally:
        folder.release()
