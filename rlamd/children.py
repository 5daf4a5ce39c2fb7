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


def _leads_group(proc: subprocess.Popen) -> bool:
    try:
        return os.getpgid(proc.pid) == proc.pid
    except OSError:  # gone
        return False


def stop(
    proc: subprocess.Popen, grace: float, group: bool = False, sig: int = signal.SIGINT
) -> None:
    """``sig`` to ``proc``, SIGKILL after ``grace`` s; returns once ``proc`` has exited.
    ``group``: both to its whole process group. A paused child is resumed first, with its
    group when it leads one (its workers must run for it to close them)."""
    if proc.poll() is not None:
        return
    send(proc, signal.SIGCONT, group or _leads_group(proc))
    for s, wait in ((sig, grace), (signal.SIGKILL, None)):
        send(proc, s, group)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
            return
