"""Other processes' load, sampled before and during a benchmark's timing: their cores
(:mod:`rlamd.cpuload`; None off Linux), and GPU utilisation where ``torch``, ``nvidia-smi``,
``rocm-smi`` or ``amd-smi`` reads it (only the reading before the timing is others' alone,
so only it can warn)."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from rlamd.cpuload import PROC, CpuSampler, runnable

__all__ = ["BUSY_CORES", "LoadMonitor", "LoadReport", "gpu_utilisation"]

BUSY_CORES, BUSY_GPU_PERCENT = 0.25, 25.0
"""The machine is busy when other processes use more cores than this on average, or the
GPU is more than this % utilised before the timing (by others)."""


def _parse(tool: str, text: str, index: int) -> float | None:
    """GPU ``index``'s % use in ``tool``'s output: nvidia-smi's CSV, a line a GPU; rocm-smi's
    ``{"card0": {"GPU use (%)": "12"}, ...}``; amd-smi's list (or ``gpu_data``) with ``usage``."""
    try:
        if tool == "nvidia-smi":
            return float([r.strip() for r in text.strip().splitlines() if r.strip()][index])
        doc = json.loads(text)
        if tool == "rocm-smi":
            card = doc[sorted(k for k in doc if k.startswith("card"))[index]]
            return float(card[next(k for k in card if "use" in k.lower() and "%" in k)])
        usage = (doc.get("gpu_data", doc) if isinstance(doc, dict) else doc)[index]["usage"]
        gfx = usage["gfx_activity"]
        return float(gfx["value"] if isinstance(gfx, dict) else gfx)
    except (ValueError, KeyError, IndexError, StopIteration, TypeError):
        return None


_READERS = (
    ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
    ["rocm-smi", "--showuse", "--json"],
    ["amd-smi", "metric", "--usage", "--json"],
)


def gpu_utilisation(index: int = 0) -> tuple[float, str] | None:
    """(% utilisation of GPU ``index``, how it was read), or None when nothing can read it."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        try:
            return float(torch.cuda.utilization(index)), "torch.cuda.utilization"
        except Exception:  # no pynvml / amdsmi, or a driver that does not say
            pass
    for cmd in (c for c in _READERS if shutil.which(c[0]) is not None):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and (value := _parse(cmd[0], out.stdout, index)) is not None:
            return value, cmd[0]
    return None


@dataclass(frozen=True)
class LoadReport:
    """Other processes' cores around a timed block (mean ``before``, mean ``during``, ``peak``;
    None: unreadable), ``own`` our tree's; GPU use % ``gpu_before`` (others') and
    ``gpu_during`` (ours too); ``runnable``: mean threads ready to run."""

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

    @property
    def busy(self) -> bool:
        cpu = max((x for x in (self.before, self.during) if x is not None), default=0.0)
        return cpu > self.threshold or (self.gpu_before or 0.0) > BUSY_GPU_PERCENT

    def warning(self, what: str) -> str | None:
        """One line for a busy machine (None when it was quiet or unreadable)."""
        if not self.busy:
            return None
        cpu = ("?" if x is None else f"{x:.2f}" for x in (self.during, self.before, self.peak))
        during, before, peak = cpu
        gpu = "" if self.gpu_before is None else f"; GPU {self.gpu_before:.0f}% busy before it"
        if self.runnable is not None:
            gpu = f"; {self.runnable:.1f} threads ready to run on average{gpu}"
        rule = f"others above {self.threshold:g} cores or the GPU above {BUSY_GPU_PERCENT:g}%"
        return (
            f"warning: busy machine during {what}: other processes used {during} of {self.cores}"
            f" cores on average ({before} before the timing, peak {peak}){gpu}; these figures "
            f"are lower and noisier than on an idle machine (busy: {rule})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "busy": self.busy}


class LoadMonitor:
    """``with LoadMonitor() as mon: <timed block>``, then ``mon.report``: samples for
    ``before_s``, then every ``interval`` s until the block ends (GPU ``gpu`` every 2 s)."""

    def __init__(
        self, before_s: float = 1.0, interval: float = 0.5, *, gpu: int | None = None, proc=PROC
    ) -> None:
        self.before_s, self.interval, self.gpu, self.proc = before_s, interval, gpu, proc
        self.report: LoadReport | None = None
        self._stop = threading.Event()
        self._during, self._gpu_during, self._runnable = [], [], []

    def __enter__(self) -> LoadMonitor:
        read = gpu_utilisation(self.gpu) if self.gpu is not None else None
        self._gpu_before, self._gpu_source = read or (None, None)
        self._sampler = CpuSampler(proc=self.proc)
        time.sleep(self.before_s)
        self._before, self._mark = self._sampler.sample(), self._sampler.ticks
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="rlamd-load", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        next_gpu = time.monotonic() + 2.0
        while not self._stop.wait(self.interval):
            if (got := self._sampler.sample()) is not None:
                self._during.append(got)
            if (ready := runnable(self.proc)) is not None:
                self._runnable.append(float(ready))
            if self._gpu_source is not None and time.monotonic() >= next_gpu:
                next_gpu += 2.0
                if (read := gpu_utilisation(self.gpu or 0)) is not None:
                    self._gpu_during.append(read[0])

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        seconds = time.monotonic() - self._t0
        last, late = self._sampler.sample(), seconds >= self.interval / 2 or not self._during
        if last is not None and late:
            self._during.append(last)
        whole = self._sampler.mean_since(self._mark)
        before, (during, own) = (self._before or [None])[0], whole or (None, None)
        peak, n = max((o for o, _ in self._during), default=None), len(self._during)
        gpu_during = statistics.fmean(self._gpu_during) if self._gpu_during else None
        ready = statistics.fmean(self._runnable) if self._runnable else None
        cpu = (self._sampler.cores, before, during, peak, own, n, round(seconds, 2))
        self.report = LoadReport(*cpu, self._gpu_before, gpu_during, self._gpu_source, ready)
