"""``python -m rlamd.sweep.child MODULE ARGS...``: run ``python -m MODULE ARGS`` for a trial,
dying with the trial.

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

__all__ = ["die_with_parent", "main"]

PR_SET_PDEATHSIG = 1
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


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: python -m rlamd.sweep.child MODULE [ARGS...]", file=sys.stderr)
        return 2
    die_with_parent()
    parent = os.environ.get(PARENT_VAR, "")
    if parent.isdigit() and os.getppid() != int(parent):
        return 128 + signal.SIGTERM  # the trial went away before the call above
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
