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

from rlamd.checkpoint import FILENAME, CheckpointError, find_checkpoint, load_checkpoint
from rlamd.config import ConfigError, bad_setting, field_docs
from rlamd.config.flags import RAY_FLAGS, SWITCHES, TRAIN_FLAGS, settings_epilog
from rlamd.config.layers import resolve
from rlamd.config.resume import check_resume, keep_saved_replay_size, replay_saved
from rlamd.config.sections import RayConfig, RunConfig, TrainConfig
from rlamd.config.values import HelpFormatter, NearestChoiceParser, help_text, shown_default
from rlamd.device import DeviceError
from rlamd.envs import import_env_modules, spaces_mismatch
from rlamd.envvars import check_environment
from rlamd.hostalloc import tune_host_allocator
from rlamd.rundir import RunBusy, holder
from rlamd.runner import run
from rlamd.storage import StorageError

REFUSED = (ConfigError, CheckpointError, StorageError, RunBusy, DeviceError)
"""What ends the command with one line and status 2, before or at the start of a run."""

__all__ = ["build_parser", "main"]


def _add_ray_flags(p: argparse.ArgumentParser) -> None:
    """The ``[ray]`` settings that have a flag of their own (``--ray``, ``--num-learners``...)."""
    ray_docs, ray_defaults = field_docs(RayConfig), RayConfig()
    cluster = p.add_argument_group(
        "distributed training on Ray (install it with: bash scripts/setup.sh --ray; "
        "README: Ray clusters)"
    )
    for field, option in RAY_FLAGS.items():
        kind = {"enabled": None, "address": str, "gpus_per_learner": float}.get(field, int)
        extra: dict[str, Any] = (
            {"action": "store_const", "const": True} if kind is None else {"type": kind}
        )
        doc = ray_docs[field]
        value = shown_default(getattr(ray_defaults, field), doc)
        shown = "" if "(default" in doc else f" (default: {value})"
        cluster.add_argument(option, dest=f"ray_{field}", default=None, help=doc + shown, **extra)


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m rlamd.train`` parser; every flag's default is None (= not given)."""
    docs, defaults = field_docs(TrainConfig), TrainConfig()
    p = NearestChoiceParser(
        prog="python -m rlamd.train",
        description="Train an agent on ENV. " + help_text((__doc__ or "").split("\n\n")[-1]),
        epilog=settings_epilog(),
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "env",
        nargs="?",
        help=f"{docs['env']} Required, unless --config names one or --resume continues a run.",
    )
    for name, kw in TRAIN_FLAGS.items():
        doc = docs[name]
        shown = (
            ""
            if "(default" in doc
            else f" (default: {shown_default(getattr(defaults, name), doc)})"
        )
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
    p.add_argument(
        "--debug",
        action="store_true",
        help="print the traceback behind an error line (a run keeps it in RUN/error.log)",
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


def _resume(args: argparse.Namespace) -> tuple[dict, Path]:
    """The checkpoint ``--resume`` names and the run folder it continues: the folder it
    lies in, wherever that is now (a moved or copied run goes on where it is).

    Raises:
        CheckpointError: no checkpoint there, an unreadable one, or a file whose folder
            holds another checkpoint (which resuming would replace).
        RunBusy: another process trains in that folder.
        ConfigError: ``--run-name`` names another folder.
    """
    path = find_checkpoint(args.resume, args.logdir or TrainConfig.logdir)
    run_dir, own = path.parent, path.parent / FILENAME
    if path.name != FILENAME and own.exists() and not own.samefile(path):
        branch = run_dir.with_name(f"{run_dir.name}-{path.stem}")
        raise CheckpointError(
            f"{path} is not its folder's checkpoint: resuming it would replace {own}. Give it "
            f"a folder of its own (mkdir {branch} && cp {path} {branch / FILENAME}) and resume "
            "that"
        )
    busy = holder(run_dir)
    if busy is not None:
        raise RunBusy(busy)
    if args.run_name and args.run_name != run_dir.name:
        raise bad_setting(
            "train",
            "run_name",
            args.run_name,
            f"none, or {run_dir.name!r}",
            why=f"--resume goes on in the folder it continues, {run_dir}; to branch a run, "
            "copy its folder and resume the copy",
        )
    return load_checkpoint(path), run_dir


def _resume_line(state: dict, cfg: RunConfig, run_dir: Path) -> str:
    """What a resumed run keeps of its checkpoint's settings, and what it changes.

    Raises:
        ConfigError: a change that the saved network or replay cannot take.
    """
    changed = check_resume(
        state["config"], cfg, replay=replay_saved(state), step=int(state["step"])
    )
    kept = "all its saved settings" if not changed else "its saved settings, except "
    return f"rlamd: resuming {run_dir} at step {state['step']:,} with {kept}" + ", ".join(changed)


def _settings(args: argparse.Namespace) -> tuple[RunConfig, dict | None, Path | None] | None:
    """The run's settings, and the checkpoint and folder it resumes; None: nothing to run."""
    check_environment()
    resume_state, run_dir = None, None
    if args.resume:
        resume_state, run_dir = _resume(args)
        _import_saved_modules(resume_state)
    elif not args.env and not args.config:
        return None
    cfg = resolve(
        flags_from_args(args),
        config_file=args.config,
        sets=args.set,
        saved=resume_state["config"] if resume_state else None,
    )
    if resume_state is not None and run_dir is not None:
        print(_resume_line(resume_state, cfg, run_dir), flush=True)
        cfg = keep_saved_replay_size(resume_state, cfg)
        _check_spaces(resume_state, cfg)
    return cfg, resume_state, run_dir


def _import_saved_modules(state: dict) -> None:
    """The checkpoint's ``--env-module`` first, so that the modules the resumed run names
    (imported as its settings resolve) come last: where both register one id, the run's
    own win, and they are what it records. A saved module that no longer imports is
    left to the resolve's checks (the run may name another)."""
    saved = state["config"].get("train", {}).get("env_module")
    try:
        import_env_modules(saved if isinstance(saved, str) else None)
    except ValueError:
        pass


def _check_spaces(state: dict, cfg: RunConfig) -> None:
    """The env as made now has the spaces the checkpoint's agent was trained on.

    Raises:
        ConfigError: it does not (another module registered the id, a changed env).
    """
    train = cfg.train
    problem = spaces_mismatch(state.get("env_spaces"), train.env, train.env_module)
    if problem is not None:
        module = f" (train.env_module={train.env_module!r})" if train.env_module else ""
        saved = state["config"]["train"].get("env_module")
        raise ConfigError(
            f"--resume: train.env={train.env!r}{module} is another env than the checkpoint's: "
            f"{problem}; accepted: the env it trained on (train.env_module={saved!r}, as saved)"
        )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tune_host_allocator()
    try:
        settings = _settings(args)
    except (*REFUSED, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rlamd: interrupted before training started; nothing was written", file=sys.stderr)
        return 130
    if settings is None:
        print(
            "error: give an environment (e.g. breakout, cartpole), --config FILE or --resume RUN",
            file=sys.stderr,
        )
        return 2
    try:
        return run(*settings, debug=args.debug)
    except REFUSED as exc:
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
