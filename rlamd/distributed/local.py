"""Starting a Ray of this process's own, patiently (no module-level Ray import)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["STARTUP_TIMEOUT", "local_ray", "own_ray_processes", "start_local"]

STARTUP_TIMEOUT = "timed out during startup"
"""Ray's message when its raylet did not register within a fixed 30 s (``ray/_private/
node.py``); a machine busy with other work can miss that once."""


def own_ray_processes() -> list[int]:
    """Pids of this process's children that run Ray's programs (a path with ``/ray/`` in
    their first two arguments: gcs_server, raylet, the reaper); read from Linux ``/proc``,
    none elsewhere."""
    if not os.path.isdir("/proc"):
        return []
    me, pids = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")[:2]
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and any(b"/ray/" in a for a in args):
            pids.append(int(entry))
    return pids


def start_local(ray, **kwargs) -> None:
    """``ray.init(address="local", **kwargs)``, tried once more when the node timed out
    during startup. The processes the failed start left running are ended first (Ray does
    not end them, and a second cluster beside them would only be slower)."""
    try:
        ray.init(address="local", **kwargs)
        return
    except Exception as exc:
        if STARTUP_TIMEOUT not in str(exc):
            raise
    for pid in own_ray_processes():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    ray.shutdown()
    ray.init(address="local", **kwargs)


@contextmanager
def local_ray(ray, cpus: int) -> Iterator[None]:
    """The Ray already running for the block, else one of this process's own with ``cpus``
    (no dashboard, workers' output not forwarded), shut down after it."""
    started = not ray.is_initialized()
    if started:
        start_local(ray, num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        if started:
            ray.shutdown()
