"""``python -m rlamd.sweep.child MODULE ARGS... [--then MODULE ARGS...]``: run ``python -m
MODULE ARGS`` (then the next, if it succeeded) for a trial, dying with the trial.

A trial trains and then evaluates in one child (``rlamd.train ... --then rlamd.evaluate
...``): one interpreter start and one torch import, not two.

A trial starts its ``rlamd.train`` (and ``rlamd.evaluate``) through this: on Linux the
child asks the kernel for SIGTERM when the thread that started it goes away
(``PR_SET_PDEATHSIG``), so a trial whose Ray worker is killed (a Ctrl-C'd or killed
driver, an early stop) still stops its run, which checkpoints on SIGTERM as it always
does, and never trains on unwatched. Setting it here, in the child, needs no
``preexec_fn`` (unsafe in a threaded parent such as a Ray worker).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path

__all__ = ["THEN", "die_with_parent", "main"]

PR_SET_PDEATHSIG = 1
THEN = "--then"
PARENT_VAR = "RLAMD_SWEEP_PARENT"
"""The PID the trial gives its child: a child whose parent is already gone exits at once."""


def die_with_parent() -> bool:
    """Ask for SIGTERM when the parent thread exits; False where the OS has no such call."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _run(module: str, args: list[str]) -> int:
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


def trained(args: list[str]) -> int | None:
    """The step of ``rlamd.train --resume DIR`` whose checkpoint already holds every one of
    its ``train.steps`` (a trial stopped after training, before its evaluation ended), so
    that only what follows runs; None otherwise (``rlamd.train`` then says what is wrong)."""
    if len(args) < 2 or args[0] != "--resume" or "--steps" in args:
        return None
    from rlamd.checkpoint import CheckpointError, load_checkpoint

    try:
        state = load_checkpoint(Path(args[1]) / "checkpoint.pt", note=lambda _: None)
    except CheckpointError:
        return None
    step = state["step"]
    return step if step >= state["config"]["train"]["steps"] else None


def main() -> int:
    if len(sys.argv) < 2:
        print(
            "usage: python -m rlamd.sweep.child MODULE [ARGS...] [--then MODULE ...]",
            file=sys.stderr,
        )
        return 2
    die_with_parent()
    parent = os.environ.get(PARENT_VAR, "")
    if parent.isdigit() and os.getppid() != int(parent):
        return 128 + signal.SIGTERM  # the trial went away before the call above
    commands, current = [], []
    for arg in sys.argv[1:]:
        if arg == THEN:
            commands.append(current)
            current = []
        else:
            current.append(arg)
    commands.append(current)
    for module, *args in commands:
        step = trained(args) if module == "rlamd.train" else None
        if step is not None:
            print(f"rlamd: {args[1]} has trained all of its {step:,} steps", flush=True)
            continue
        status = _run(module, args)
        if status != 0:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
