"""Other processes' CPU use on this process's cores, in cores: their busy time (``/proc/stat``)
less this process tree's (live processes from ``/proc/PID/stat``, reaped ones from their
parents' child times). A run's own worker processes (``vector = "async"`` envs, a peer's
pool) are in the tree, so not "other". :class:`rlamd.threads.LoadWatch` sizes torch's pool
from it, and the bench's load reports (``rlamd.bench.load``) warn from it. Off Linux every
figure is None.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PROC", "CpuSampler", "cores_available", "runnable"]

PROC = Path("/proc")


def _mask() -> set[int] | None:
    """The cores in this process's affinity mask; None where it is unknown (not Linux)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def cores_available() -> int:
    """Cores this process may run on: its affinity mask (taskset, cgroup cpusets), >= 1;
    ``os.cpu_count()`` only where the mask is unknown."""
    mask = _mask()
    return max(1, len(mask) if mask else os.cpu_count() or 1)


def _stat_of(proc: Path, pid: int) -> tuple[int, int] | None:
    """(parent, utime + stime + cutime + cstime) of ``pid``; None once it has exited."""
    try:
        text = (proc / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
        f = text.rsplit(")", 1)[1].split()  # the name may hold spaces and ')'
        return int(f[1]), sum(map(int, f[11:15]))
    except (OSError, ValueError, IndexError):
        return None


def _descendants(proc: Path, root: int) -> list[int] | None:
    """``root`` and its descendants from the kernel's ``task/TID/children`` lists (a few
    files, whatever else runs); None where the kernel has none (then every process is read)."""
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        try:
            for tid in os.listdir(proc / str(pid) / "task"):
                todo += map(int, (proc / str(pid) / "task" / tid / "children").read_text().split())
        except FileNotFoundError:
            if pid == root:
                return None
        except (OSError, ValueError):  # it exited while we read
            continue
    return tree


def _own_ticks(proc: Path, root: int) -> dict[int, tuple[int, int]]:
    """pid -> (parent, ticks as :func:`_stat_of`) for ``root`` and its descendants."""
    pids = _descendants(proc, root)
    if pids is not None:
        return {p: got for p in pids if (got := _stat_of(proc, p)) is not None}
    try:
        entries = [int(e) for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        entries = []
    table = {p: got for p in entries if (got := _stat_of(proc, p)) is not None}
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


def _machine_ticks(proc: Path, cpus: set[int] | None) -> tuple[int, int, int] | None:
    """(busy, total, cores) ticks of the cores in ``cpus`` (their ``cpuN`` lines; all of them
    when None or when the file has no such lines): user nice system idle iowait irq softirq
    steal (guest time is in user)."""
    try:
        with open(proc / "stat", encoding="ascii") as f:
            rows = [line.split() for line in f if line.startswith("cpu")]
    except OSError:
        return None
    per = {int(r[0][3:]): r for r in rows if r[0][3:].isdigit()}
    mine = [per[c] for c in sorted(cpus or ()) if c in per]
    cores = len(mine)
    if not mine:  # no per-core lines (or none of ours): the machine's line over every core
        mine, cores = [r for r in rows if r[0] == "cpu"], len(per) or os.cpu_count() or 1
        if not mine:
            return None
    busy = total = 0
    for r in mine:
        f = [int(x) for x in r[1:9]]
        busy, total = busy + sum(f) - f[3] - (f[4] if len(f) > 4 else 0), total + sum(f)
    return busy, total, cores


class CpuSampler:
    """:meth:`sample`: ``(others, own)`` cores' worth of CPU since the last sample (None off
    Linux), on the cores this process may run on (its affinity mask's ``cpuN`` lines: load on
    cores a cpuset keeps us off is not ours to share; :attr:`cores` of them). Own: each
    descendant's growth, a new one's whole time, and for one reaped in the tree its
    parent's jump in child time less what was already counted for it. ``ticks``
    sums every sample's (others, own, one core's ticks): :meth:`mean_since` averages over
    samples, so a descendant that leaves the tree unreaped (killed with its parent, as a
    peer's worker pool can be) keeps the time it was seen using."""

    def __init__(self, pid: int | None = None, proc: Path = PROC) -> None:
        self.pid, self.proc, self.cpus = pid or os.getpid(), proc, _mask()
        self._machine = _machine_ticks(proc, self.cpus)
        self._own = _own_ticks(proc, self.pid)
        self.cores = self._machine[2] if self._machine else cores_available()
        self.ticks = (0.0, 0.0, 0.0)

    def sample(self) -> tuple[float, float] | None:
        machine = _machine_ticks(self.proc, self.cpus)
        own = _own_ticks(self.proc, self.pid)
        if machine is None or self._machine is None:
            return None
        busy, total = machine[0] - self._machine[0], machine[1] - self._machine[1]
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
