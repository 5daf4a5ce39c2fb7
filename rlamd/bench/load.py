"""Other processes' load on this machine, sampled before and during a benchmark's timing.

:class:`LoadMonitor` samples, around one timed block: the **CPU other processes used**
(the machine's busy time from ``/proc/stat`` less the CPU time of this process and every
process it started, live ones from ``/proc/PID/stat`` and reaped ones from their parents'
child times), in cores; a neighbour the bench starts on purpose is a descendant, so it is
not "other" load. And the **GPU utilisation** of the bench's GPU where readable
(``torch.cuda.utilization``, ``nvidia-smi``, ``rocm-smi`` or ``amd-smi``): before the
timing it is other processes' use; during it the bench's own kernels count too, so that
figure is recorded but never warned about. The machine counts as busy when others used
more than :data:`BUSY_CORES` cores on average before or during the timing, or the GPU was
more than :data:`BUSY_GPU_PERCENT` % busy before it; the report then has a one-line
warning. Off Linux (no ``/proc``) every CPU figure is None and nothing is warned.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["BUSY_CORES", "CpuSampler", "LoadMonitor", "LoadReport", "gpu_utilisation", "runnable"]

BUSY_CORES = 0.25
"""Other processes using more than this many cores on average make the machine busy."""
BUSY_GPU_PERCENT = 25.0
"""A GPU more than this % utilised before the timing (by others) makes the machine busy."""

_PROC = Path("/proc")


def _ticks_table(proc: Path) -> dict[int, tuple[int, int]] | None:
    """pid -> (parent pid, utime + stime + cutime + cstime) for every readable process."""
    table: dict[int, tuple[int, int]] = {}
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            text = (proc / entry / "stat").read_text(encoding="ascii", errors="replace")
            f = text.rsplit(")", 1)[1].split()  # the name may hold spaces and ')'
            table[int(entry)] = (int(f[1]), int(f[11]) + int(f[12]) + int(f[13]) + int(f[14]))
        except (OSError, ValueError, IndexError):  # it exited while we read
            continue
    return table


def _tree(table: dict[int, tuple[int, int]], root: int) -> set[int]:
    """``root`` and all its descendants in ``table``."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    seen, todo = {root}, [root]
    while todo:
        for kid in children.get(todo.pop(), []):
            if kid not in seen:
                seen.add(kid)
                todo.append(kid)
    return seen


def runnable(proc: Path = _PROC) -> int | None:
    """Threads ready to run on the machine now (``procs_running``), less the reader."""
    try:
        with open(proc / "stat", encoding="ascii") as f:
            for line in f:
                if line.startswith("procs_running"):
                    return max(0, int(line.split()[1]) - 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _machine_ticks(proc: Path) -> tuple[int, int] | None:
    """(busy ticks, total ticks) summed over every core, from ``/proc/stat``."""
    try:
        with open(proc / "stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal; guest is in user
    return total - fields[3] - (fields[4] if len(fields) > 4 else 0), total


class CpuSampler:
    """Cores' worth of CPU that other processes and this process tree used between samples.

    Each :meth:`sample` returns ``(others, own)`` since the previous one, or None off
    Linux. Own time is counted per process: a descendant's growth since the last sample,
    a new descendant's whole time, and for a descendant reaped by a parent in the tree
    the parent's jump in child time less what was already counted for it.
    """

    def __init__(self, pid: int | None = None, proc: Path = _PROC) -> None:
        self.pid, self.proc = pid or os.getpid(), proc
        self.cores = max(1, os.cpu_count() or 1)
        self._machine = _machine_ticks(proc)
        self._own = self._own_ticks()

    def _own_ticks(self) -> dict[int, tuple[int, int]]:
        table = _ticks_table(self.proc) or {}
        return {pid: table[pid] for pid in _tree(table, self.pid) if pid in table}

    def sample(self) -> tuple[float, float] | None:
        machine, own = _machine_ticks(self.proc), self._own_ticks()
        if machine is None or self._machine is None:
            return None
        busy, total = (a - b for a, b in zip(machine, self._machine, strict=True))
        spent = 0
        for pid, (_, ticks) in own.items():
            spent += ticks - self._own[pid][1] if pid in self._own else ticks
        for pid, (ppid, ticks) in self._own.items():
            if pid not in own and ppid in own:  # reaped by a parent in the tree
                spent -= ticks
        self._machine, self._own = machine, own
        if total <= 0:
            return 0.0, 0.0
        core = total / self.cores  # one core's worth of ticks in this interval
        own_cores = max(0.0, spent / core)
        return max(0.0, (busy - spent) / core), own_cores


def _smi(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _parse_nvidia(text: str, index: int) -> float | None:
    rows = [r.strip() for r in text.strip().splitlines() if r.strip()]
    try:
        return float(rows[index])
    except (IndexError, ValueError):
        return None


def _parse_rocm(text: str, index: int) -> float | None:
    """``rocm-smi --showuse --json``: ``{"card0": {"GPU use (%)": "12"}, ...}``."""
    try:
        doc = json.loads(text)
        cards = sorted(k for k in doc if k.startswith("card"))
        card = doc[cards[index]]
        key = next(k for k in card if "use" in k.lower() and "%" in k)
        return float(card[key])
    except (ValueError, KeyError, IndexError, StopIteration, TypeError):
        return None


def _parse_amd(text: str, index: int) -> float | None:
    """``amd-smi metric --usage --json``: a list (or ``gpu_data``) of GPUs with ``usage``."""
    try:
        doc = json.loads(text)
        gpus = doc.get("gpu_data", doc) if isinstance(doc, dict) else doc
        usage = gpus[index]["usage"]["gfx_activity"]
        return float(usage["value"] if isinstance(usage, dict) else usage)
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def gpu_utilisation(index: int = 0) -> tuple[float, str] | None:
    """(% utilisation of GPU ``index``, how it was read), or None when nothing can read it."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        try:
            return float(torch.cuda.utilization(index)), "torch.cuda.utilization"
        except Exception:  # no pynvml / amdsmi, or a driver that does not say
            pass
    readers: list[tuple[list[str], Callable[[str, int], float | None]]] = [
        (["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
         _parse_nvidia),
        (["rocm-smi", "--showuse", "--json"], _parse_rocm),
        (["amd-smi", "metric", "--usage", "--json"], _parse_amd),
    ]  # fmt: skip
    for cmd, parse in readers:
        text = _smi(cmd)
        value = parse(text, index) if text else None
        if value is not None:
            return value, cmd[0]
    return None


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


@dataclass(frozen=True)
class LoadReport:
    """What other processes did to the machine around one timed block.

    ``before``, ``during`` and ``peak``: other processes' cores (mean over the sampling
    before the timing, mean over the timing, highest ``interval`` sample in it; None:
    unreadable); ``own``: this process tree's cores during it. ``gpu_before`` (others'
    use) and ``gpu_during`` (the bench's own kernels included): GPU utilisation %, where
    ``gpu_source`` could read it. ``runnable``: threads ready to run (the bench's own
    included), mean over the samples: above the core count threads wait for a core, and a
    multi-threaded step waits for its slowest thread, so it says more than ``during``.
    """

    cores: int
    before: float | None
    during: float | None
    peak: float | None
    own: float | None
    samples: int
    seconds: float
    gpu_before: float | None = None
    gpu_during: float | None = None
    gpu_source: str | None = None
    runnable: float | None = None
    threshold: float = BUSY_CORES
    """Others' cores above which the machine counts as busy."""

    @property
    def busy(self) -> bool:
        cpu = max((x for x in (self.before, self.during) if x is not None), default=0.0)
        return cpu > self.threshold or (self.gpu_before or 0.0) > BUSY_GPU_PERCENT

    def warning(self, what: str) -> str | None:
        """One line for a busy machine (None when it was quiet or unreadable)."""
        if not self.busy:
            return None

        def cores(x: float | None) -> str:
            return "?" if x is None else f"{x:.2f}"

        gpu = "" if self.gpu_before is None else f"; GPU {self.gpu_before:.0f}% busy before it"
        if self.runnable is not None:
            gpu = f"; {self.runnable:.1f} threads ready to run on average{gpu}"
        return (
            f"warning: busy machine during {what}: other processes used {cores(self.during)} "
            f"of {self.cores} cores on average ({cores(self.before)} before the timing, peak "
            f"{cores(self.peak)}){gpu}; these figures are lower and noisier than on an idle "
            f"machine (busy: others above {self.threshold:g} cores or the GPU above "
            f"{BUSY_GPU_PERCENT:g}%)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "busy": self.busy}

    def cell(self) -> str:
        """Others' cores during the timing as a table cell."""
        return "-" if self.during is None else f"{self.during:.2f}"


class LoadMonitor:
    """``with LoadMonitor() as mon: <timed block>``; then ``mon.report`` (a LoadReport).

    Entering samples for ``before_s`` seconds (the before figure), then a daemon thread
    samples every ``interval`` seconds until the block ends. ``gpu`` (a device index or
    None) also reads that GPU's utilisation, at most every ``gpu_interval`` seconds.
    """

    def __init__(
        self,
        before_s: float = 1.0,
        interval: float = 0.5,
        *,
        gpu: int | None = None,
        gpu_interval: float = 2.0,
        proc: Path = _PROC,
    ) -> None:
        self.before_s, self.interval, self.gpu, self.gpu_interval = (
            before_s,
            interval,
            gpu,
            gpu_interval,
        )
        self.proc = proc
        self.report: LoadReport | None = None
        self._stop = threading.Event()
        self._during: list[tuple[float, float]] = []
        self._gpu_during: list[float] = []
        self._runnable: list[int] = []

    def __enter__(self) -> LoadMonitor:
        self._gpu_source: str | None = None
        self._gpu_before: float | None = None
        if self.gpu is not None:
            read = gpu_utilisation(self.gpu)
            if read is not None:
                self._gpu_before, self._gpu_source = read
        sampler = CpuSampler(proc=self.proc)
        time.sleep(self.before_s)
        self._before = sampler.sample()
        self._sampler = sampler
        self._whole = CpuSampler(proc=self.proc)  # start to end: the exact means
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="rlamd-load", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        next_gpu = time.monotonic() + self.gpu_interval
        while not self._stop.wait(self.interval):
            got = self._sampler.sample()
            if got is not None:
                self._during.append(got)
            ready = runnable(self.proc)
            if ready is not None:
                self._runnable.append(ready)
            if self._gpu_source is not None and time.monotonic() >= next_gpu:
                next_gpu += self.gpu_interval
                read = gpu_utilisation(self.gpu or 0)
                if read is not None:
                    self._gpu_during.append(read[0])

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        seconds = time.monotonic() - self._t0
        whole, last = self._whole.sample(), self._sampler.sample()
        if last is not None and (seconds >= self.interval / 2 or not self._during):
            self._during.append(last)
        others = [o for o, _ in self._during]
        self.report = LoadReport(
            cores=self._sampler.cores,
            before=None if self._before is None else self._before[0],
            during=None if whole is None else whole[0],
            peak=max(others) if others else None,
            own=None if whole is None else whole[1],
            samples=len(self._during),
            seconds=round(seconds, 2),
            gpu_before=self._gpu_before,
            gpu_during=_mean(self._gpu_during),
            gpu_source=self._gpu_source,
            runnable=_mean([float(r) for r in self._runnable]),
        )
