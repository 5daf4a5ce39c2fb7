"""``python -m rlamd.sweep ENV [rlamd.train flags] [sweep flags]``: many runs on Ray Tune.

Example::

    python -m rlamd.sweep cartpole --algo ppo --steps 20000 --seeds 5
    python -m rlamd.sweep cartpole --algo dqn --grid dqn.lr=1e-4,1e-3 --seeds 3
    python -m rlamd.sweep cartpole --algo ppo --sample ppo.clip_coef=uniform:0.1:0.3 \\
        --samples 8 --scheduler asha --metric score
    python -m rlamd.sweep --resume runs/cartpole_ppo_sweep_20261201-120000
    python -m rlamd.sweep --report runs/cartpole_ppo_sweep_20261201-120000

Every flag that is not the sweep's own goes to each trial's ``python -m rlamd.train``
(``--steps``, ``--set``, ``--config``, ``--device``...), checked by it before any trial
starts. Each trial is an ordinary run folder, ``LOGDIR/SWEEP/TRIAL/``.
"""

from __future__ import annotations

import argparse
import sys

from rlamd.config import ConfigError
from rlamd.rundir import RunBusy
from rlamd.storage import StorageError

from .plan import SweepError

__all__ = ["build_parser", "main"]

REFUSED = (ConfigError, SweepError, RunBusy, StorageError, ImportError)


def _add_resources(p: argparse.ArgumentParser) -> None:
    add = p.add_argument
    add(
        "--cpus-per-trial",
        type=float,
        default=1.0,
        help="CPUs per trial; its thread "
        "budget (train.threads) is this share, at least 1 (default: 1)",
    )
    add(
        "--gpus-per-trial",
        type=float,
        default=0.0,
        help="GPU share per trial: 0.25 puts four trials on a GPU (default: 0)",
    )
    add(
        "--max-concurrent",
        type=int,
        default=None,
        help="trials at once (default: as the resources allow)",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m rlamd.sweep",
        description="Run many rlamd runs (seeds; a grid, random or Optuna search of any "
        "--set key; ASHA early stopping) as Ray Tune trials, and report them over seeds.",
        epilog="Every other flag is rlamd.train's (python -m rlamd.train --help) and goes to "
        "each trial. " + (__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # --seed (a trial's) must not read as --seeds
    )
    add = p.add_argument
    add("--seeds", default="1", help="N seeds from --seed (default 1), or a list: 1,2,7")
    add(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="values of a setting; repeatable: every combination is a configuration",
    )
    add(
        "--sample",
        action="append",
        default=[],
        metavar="KEY=DIST",
        help="draw a setting: uniform:LOW:HIGH, loguniform:LOW:HIGH, int:LOW:HIGH, "
        "choice:A,B; repeatable",
    )
    add("--samples", type=int, default=1, help="draws of --sample (default: 1)")
    add(
        "--search",
        default=None,
        help="grid, random or optuna (default: grid; random "
        "with --sample; optuna needs the optuna package)",
    )
    add("--sample-seed", type=int, default=0, help="seed of the draws (default: 0)")
    add("--scheduler", default="none", help="none or asha (early stopping on --metric)")
    add(
        "--metric", default="score", help="score (training episodes) or eval_score (default: score)"
    )
    add("--mode", default="max", help="max or min (default: max)")
    add(
        "--grace-steps",
        type=int,
        default=None,
        help="ASHA: env steps before a trial may be stopped (default: a sixteenth of --steps)",
    )
    _add_resources(p)
    add("--name", default=None, help="the sweep folder's name (default: ENV_ALGO_sweep_TIME)")
    add("--resume", metavar="DIR", help="continue the sweep in DIR with its saved settings")
    add("--report", metavar="DIR", help="write and print the results of the sweep in DIR")
    add("--quiet", action="store_true", help="no Tune status table")
    return p


def _new(args: argparse.Namespace, rest: list[str]) -> int:
    from rlamd.train import build_parser as train_parser
    from rlamd.train import flags_from_args

    from .driver import plan, run
    from .space import Base, parse_grid, parse_sample

    tp = train_parser()
    tp.prog = "python -m rlamd.sweep (a trial's rlamd.train flags)"
    targs = tp.parse_args(rest)
    if targs.resume:
        raise ConfigError(
            "--resume names a sweep folder here and comes alone: python -m rlamd.sweep --resume DIR"
        )
    if not targs.env and not targs.config:
        raise ConfigError(
            "give an environment (e.g. cartpole, breakout), --config FILE, "
            "--resume DIR or --report DIR"
        )
    base = Base(flags_from_args(targs), targs.config, tuple(targs.set or ()))
    p = plan(
        rest,
        base,
        seeds=args.seeds,
        grid=parse_grid(args.grid),
        sample=parse_sample(args.sample),
        samples=args.samples,
        search=args.search,
        scheduler=args.scheduler,
        metric=args.metric,
        mode=args.mode,
        grace_steps=args.grace_steps,
        cpus_per_trial=args.cpus_per_trial,
        gpus_per_trial=args.gpus_per_trial,
        max_concurrent=args.max_concurrent,
        name=args.name,
        sample_seed=args.sample_seed,
    )
    status, _ = run(p, verbose=0 if args.quiet else 1)
    return status


def main(argv: list[str] | None = None) -> int:
    args, rest = build_parser().parse_known_args(argv)
    try:
        if args.report:
            from .report import write_report

            write_report(args.report, out=sys.stdout)
            return 0
        if args.resume:
            if rest or args.grid or args.sample:
                raise ConfigError(
                    f"--resume {args.resume} with {' '.join(rest or args.grid or args.sample)}: "
                    "a sweep resumes with its saved settings; accepted: --resume DIR alone"
                )
            from .driver import resume

            return resume(args.resume, verbose=0 if args.quiet else 1)[0]
        return _new(args, rest)
    except REFUSED as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rlamd: sweep interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
