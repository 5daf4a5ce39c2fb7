"""``python -m rlamd.train ENV``: train an agent with good defaults.

Example::

    python -m rlamd.train breakout                       # DQN, Atari defaults
    python -m rlamd.train cartpole --steps 50000 --device cpu
    python -m rlamd.train breakout --set dqn.lr=6.25e-5 --set atari.sticky=0.25
    python -m rlamd.train --resume runs/breakout_dqn_s1_20261130-101500

Settings come, later winning, from the defaults, the preset for the env family,
``--config FILE.toml``, the flags, and ``--set section.key=value``. The resolved
configuration is saved in the run folder (``config.toml``, readable with ``--config``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rlamd.checkpoint import CheckpointError, find_checkpoint, load_checkpoint
from rlamd.config import ConfigError, field_docs
from rlamd.config.flags import RAY_FLAGS, SWITCHES, TRAIN_FLAGS, settings_epilog
from rlamd.config.layers import resolve
from rlamd.config.sections import RayConfig, TrainConfig
from rlamd.device import DeviceError
from rlamd.hostalloc import tune_host_allocator
from rlamd.runner import run

__all__ = ["build_parser", "main"]


def _add_ray_flags(p: argparse.ArgumentParser) -> None:
    """The ``[ray]`` settings that have a flag of their own (``--ray``, ``--num-learners``...)."""
    ray_docs, ray_defaults = field_docs(RayConfig), RayConfig()
    cluster = p.add_argument_group(
        "distributed training on Ray (install it with `bash scripts/setup.sh --ray`; "
        "README: Ray clusters)"
    )
    for field, option in RAY_FLAGS.items():
        kind = {"enabled": None, "address": str, "gpus_per_learner": float}.get(field, int)
        extra: dict[str, Any] = (
            {"action": "store_const", "const": True} if kind is None else {"type": kind}
        )
        doc = ray_docs[field]
        shown = "" if "(default" in doc else f" (default: {getattr(ray_defaults, field)})"
        cluster.add_argument(option, dest=f"ray_{field}", default=None, help=doc + shown, **extra)


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m rlamd.train`` parser; every flag's default is None (= not given)."""
    docs, defaults = field_docs(TrainConfig), TrainConfig()
    p = argparse.ArgumentParser(
        prog="python -m rlamd.train",
        description="Train an agent on ENV. " + (__doc__ or "").split("\n\n")[-1].strip(),
        epilog=settings_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "env",
        nargs="?",
        help=f"{docs['env']} Required, unless --config names one or --resume continues a run.",
    )
    for name, kw in TRAIN_FLAGS.items():
        doc = docs[name]
        shown = "" if "(default" in doc else f" (default: {getattr(defaults, name)})"
        p.add_argument(
            f"--{name.replace('_', '-')}", dest=name, default=None, help=doc + shown, **kw
        )
    for name in SWITCHES:
        p.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            action="store_const",
            const=True,
            default=None,
            help=f"{docs[name]} (default: off)",
        )
    p.add_argument(
        "--no-tensorboard",
        action="store_true",
        help="do not write TensorBoard events (default: write them)",
    )
    _add_ray_flags(p)
    p.add_argument(
        "--config", metavar="FILE.toml", help="read settings from a TOML file (default: none)"
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="SECTION.KEY=VALUE",
        help="override any setting; repeatable (default: none)",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_OR_CKPT",
        help="continue a run from its checkpoint (default: start a new run)",
    )
    return p


def flags_from_args(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The settings the flags gave, by section (flags not given are left out)."""
    train = {f: getattr(args, f) for f in (*TRAIN_FLAGS, *SWITCHES) if getattr(args, f) is not None}
    if args.env:
        train["env"] = args.env
    if args.no_tensorboard:
        train["tensorboard"] = False
    ray = {f: getattr(args, f"ray_{f}") for f in RAY_FLAGS if getattr(args, f"ray_{f}") is not None}
    return {"train": train, "ray": ray}


def _explain_gpu_error(exc: RuntimeError) -> int | None:
    """Print a known GPU error with its fix; None if the error is not a known one."""
    from rlamd.doctor.known_errors import explain, format_explanation

    rows = explain(str(exc))
    if not rows:
        return None
    first = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    print(
        f"error: training stopped by a GPU error: {first}\n{format_explanation(rows[0])}\n"
        "The last checkpoint was kept; continue with --resume RUN once fixed. Check the machine "
        "with `python -m rlamd.doctor`, or paste any error into `python -m rlamd.doctor "
        '--explain "..."`.',
        file=sys.stderr,
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tune_host_allocator()
    try:
        resume_state, run_dir = None, None
        if args.resume:
            path = find_checkpoint(args.resume, args.logdir or TrainConfig.logdir)
            resume_state = load_checkpoint(path)
            run_dir = Path(resume_state.get("run_dir") or path.parent)
            if not run_dir.is_dir():
                run_dir = path.parent
        elif not args.env and not args.config:
            print(
                "error: give an environment (e.g. breakout, cartpole), --config FILE or "
                "--resume RUN",
                file=sys.stderr,
            )
            return 2
        cfg = resolve(
            flags_from_args(args),
            config_file=args.config,
            sets=args.set,
            saved=resume_state["config"] if resume_state else None,
        )
    except (ConfigError, CheckpointError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return run(cfg, resume_state, run_dir)
    except (ConfigError, DeviceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # GPU errors (torch.OutOfMemoryError is one too)
        status = _explain_gpu_error(exc)
        if status is None:
            raise
        return status


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
