"""Other processes' CPU use on this machine, in cores: the machine's busy time (``/proc/stat``)
less this process tree's (live processes from ``/proc/PID/stat``, reaped ones from their
parents' child times). A run's own worker processes (``vector = "async"`` envs, a peer's
pool) are in the tree, so not "other". :class:`rlamd.threads.LoadWatch` sizes torch's pool
from it, and the bench's load reports (``rlamd.bench.load``) warn from it. Off Linux every
figure is None.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PROC", "CpuSampler", "runnable"]

PROC = Path("/proc")


def _own_ticks(proc: Path, root: int) -> dict[int, tuple[int, int]]:
    """pid -> (parent, utime + stime + cutime + cstime) for ``root`` and its descendants."""
    table: dict[int, tuple[int, int]] = {}
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        entries = []
    for entry in entries:
        try:
            text = (proc / entry / "stat").read_text(encoding="ascii", errors="replace")
            f = text.rsplit(")", 1)[1].split()  # the name may hold spaces and ')'
            table[int(entry)] = (int(f[1]), sum(map(int, f[11:15])))
        except (OSError, ValueError, IndexError):  # it exited while we read
            continue
    tree = {root}
    while grown := {p for p, (parent, _) in table.items() if parent in tree} - tree:
        tree |= grown
    return {pid: table[pid] for pid in tree if pid in table}


def _stat(proc: Path, key: str) -> list[int] | None:
    try:
        with open(proc / "stat", encoding="ascii") as f:
            return next([int(x) for x in line.split()[1:]] for line in f if line.startswith(key))
    except (OSError, ValueError, StopIteration):
        return None


def runnable(proc: Path = PROC) -> int | None:
    """Threads ready to run on the machine now (``procs_running``), less the reader."""
    got = _stat(proc, "procs_running")
    return None if got is None else max(0, got[0] - 1)


def _machine_ticks(proc: Path) -> tuple[int, int] | None:
    """(busy, total) ticks over every core: user nice system idle iowait irq softirq steal
    (guest time is in user)."""
    f = _stat(proc, "cpu ")
    return None if f is None else (sum(f[:8]) - f[3] - (f[4] if len(f) > 4 else 0), sum(f[:8]))


class CpuSampler:
    """:meth:`sample`: ``(others, own)`` cores' worth of CPU since the last sample (None off
    Linux). Own: each descendant's growth, a new one's whole time, and for one reaped in the
    tree its parent's jump in child time less what was already counted for it. ``ticks``
    sums every sample's (others, own, one core's ticks): :meth:`mean_since` averages over
    samples, so a descendant that leaves the tree unreaped (killed with its parent, as a
    peer's worker pool can be) keeps the time it was seen using."""

    def __init__(self, pid: int | None = None, proc: Path = PROC) -> None:
        self.pid, self.proc = pid or os.getpid(), proc
        self.cores = max(1, os.cpu_count() or 1)
        self._machine, self._own = _machine_ticks(proc), _own_ticks(proc, self.pid)
        self.ticks = (0.0, 0.0, 0.0)

    def sample(self) -> tuple[float, float] | None:
        machine, own = _machine_ticks(self.proc), _own_ticks(self.proc, self.pid)
        if machine is None or self._machine is None:
            return None
        busy, total = (a - b for a, b in zip(machine, self._machine, strict=True))
        spent = sum(t - self._own[p][1] if p in self._own else t for p, (_, t) in own.items())
        spent -= sum(t for p, (pp, t) in self._own.items() if p not in own and pp in own)
        self._machine, self._own = machine, own
        if total <= 0:
            return 0.0, 0.0
        core = total / self.cores  # one core's worth of ticks in this interval
        spent = max(0.0, spent)  # a child reaped outside the tree: its parent's jump is absent
        others = max(0.0, busy - spent)
        self.ticks = tuple(a + b for a, b in zip(self.ticks, (others, spent, core), strict=True))
        return others / core, spent / core

    def mean_since(self, mark: tuple[float, float, float]) -> tuple[float, float] | None:
        """``(others, own)`` in cores over the samples taken since ``ticks`` was ``mark``."""
        others, own, core = (a - b for a, b in zip(self.ticks, mark, strict=True))
        return (others / core, own / core) if core > 0 else None
