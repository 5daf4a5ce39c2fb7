"""Child processes stopped surely: a signal the child handles (rlamd checkpoints on SIGINT
and SIGTERM), a grace period, then SIGKILL. The sweep's trials and the bench's contenders
stop through :func:`stop`."""

from __future__ import annotations

import os
import signal
import subprocess
from contextlib import suppress

__all__ = ["send", "stop"]


def send(proc: subprocess.Popen, sig: int, group: bool = False) -> None:
    """``sig`` to ``proc`` (its process group with ``group``), unless it is gone."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, sig) if group else proc.send_signal(sig)


def stop(proc: subprocess.Popen, grace: float, group: bool = False, sig: int = signal.SIGINT):
    """``sig`` to ``proc`` (resumed first, if it was stopped), SIGKILL after ``grace`` s;
    returns once it has exited. ``group``: to its whole process group."""
    for s, wait in ((signal.SIGCONT, 0.0), (sig, grace), (signal.SIGKILL, None)):
        send(proc, s, group)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
            return
