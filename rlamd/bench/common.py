"""Timing helpers shared by every benchmark: warm-up excluded, contenders interleaved
(A B A B ...), medians of repeats and ratios per round with their spread."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

__all__ = [
    "MIN_REPEATS",
    "Contender",
    "Figure",
    "Ratio",
    "StepCost",
    "distinct_precisions",
    "interleave",
    "machine_info",
    "measure",
    "note_ratio",
    "print_table",
    "ratio",
    "step_cost",
    "sync",
    "timed",
]


def sync(device: torch.device | str | None) -> None:
    """Wait for queued GPU work so a timer measures it (a no-op on the CPU)."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Figure:
    """One measured quantity: the median of repeats, with min, max and the raw values."""

    name: str
    unit: str
    median: float
    min: float
    max: float
    repeats: list[float] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


MIN_REPEATS = 3
"""Timed repeats the command line gives every compared figure (interleaved A B A B ...)."""


@dataclass(frozen=True)
class Contender:
    """One thing :func:`interleave` times: a figure's name and unit, and one repeat."""

    name: str
    unit: str
    run: Callable[[], float]
    """One timed repeat; returns the figure's value for it (see :func:`timed`)."""
    meta: dict[str, Any] = field(default_factory=dict)
    warmup: Callable[[], object] | None = None
    """Called before the first round instead of ``run`` (default: ``run``, untimed)."""


def timed(
    fn: Callable[[], int | float],
    *,
    device: torch.device | str | None = None,
    per: str = "rate",
) -> Callable[[], float]:
    """A repeat that times one call of ``fn`` (which returns the units of work it did).

    With ``per="rate"`` the value is work per second; with ``per="us"`` microseconds per
    unit of work. Queued GPU work on ``device`` is waited for before and after.
    """
    if per not in ("rate", "us"):
        raise ValueError(f"per={per!r}; accepted: 'rate' or 'us'")

    def run() -> float:
        sync(device)
        t0 = time.perf_counter()
        work = fn()
        sync(device)
        dt = time.perf_counter() - t0
        return work / dt if per == "rate" else dt / work * 1e6

    return run


def interleave(contenders: list[Contender], *, repeats: int, warmup: int = 1) -> list[Figure]:
    """Time ``contenders`` in rounds, A B C A B C ..., ``repeats`` rounds after warm-up.

    Every contender is warmed up ``warmup`` times (untimed) first. Round ``i`` times each
    contender once, in the order given, so a machine that drifts (a neighbour starting,
    clocks throttling) hits every contender alike; :func:`ratio` compares two figures
    round by round. Returns one :class:`Figure` per contender, in order, with its
    repeats in round order (median, min and max over them).
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats}; accepted: an integer >= 1")
    names = [c.name for c in contenders]
    if len(set(names)) != len(names):
        raise ValueError(f"contender names must differ, got {names}")
    for c in contenders:
        for _ in range(warmup):
            (c.warmup or c.run)()
    values: list[list[float]] = [[] for _ in contenders]
    for _ in range(repeats):
        for c, vs in zip(contenders, values, strict=True):
            vs.append(float(c.run()))
    figures = []
    for c, vs in zip(contenders, values, strict=True):
        meta = {"repeats": repeats, **c.meta}
        if len(contenders) > 1:
            meta["interleaved_with"] = [n for n in names if n != c.name]
        figures.append(Figure(c.name, c.unit, statistics.median(vs), min(vs), max(vs), vs, meta))
    return figures


def measure(
    name: str,
    unit: str,
    fn: Callable[[], int | float],
    *,
    repeats: int = 5,
    warmup: int = 1,
    device: torch.device | str | None = None,
    per: str = "rate",
    **meta: Any,
) -> Figure:
    """One figure alone: :func:`interleave` with a single contender timing ``fn``.

    ``fn`` returns how many units of work it did (steps, updates). With ``per="rate"``
    the figure is work per second; with ``per="us"`` microseconds per unit of work.
    """
    run = timed(fn, device=device, per=per)
    return interleave([Contender(name, unit, run, meta)], repeats=repeats, warmup=warmup)[0]


@dataclass(frozen=True)
class Ratio:
    """``a / b`` per round of an interleaved measurement: its median and spread."""

    median: float
    low: float
    high: float
    rounds: tuple[float, ...]

    def text(self) -> str:
        """``1.55x (1.40-1.62)``: the median ratio and the range over rounds."""
        return f"{self.median:.2f}x ({self.low:.2f}-{self.high:.2f})"

    def cell(self) -> str:
        """``1.55 (1.40-1.62)`` for a table's ratio column."""
        return f"{self.median:.2f} ({self.low:.2f}-{self.high:.2f})"

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.low, "max": self.high, "rounds": self.rounds}


def ratio(a: Figure, b: Figure) -> Ratio:
    """``a / b`` round by round (figures from the same :func:`interleave` call).

    Raises:
        ValueError: the figures have different numbers of repeats (not one interleaving).
    """
    if len(a.repeats) != len(b.repeats) or not a.repeats:
        raise ValueError(
            f"{a.name} has {len(a.repeats)} repeats and {b.name} {len(b.repeats)}; a ratio "
            "per round needs two figures from one interleave() call"
        )
    rounds = tuple(x / y for x, y in zip(a.repeats, b.repeats, strict=True))
    return Ratio(statistics.median(rounds), min(rounds), max(rounds), rounds)


def note_ratio(f: Figure, key: str, r: Ratio) -> None:
    """Record ``r`` in ``f.meta``: ``key`` (the median) and ``key + "_range"`` (min, max)."""
    f.meta[key] = r.median
    f.meta[f"{key}_range"] = [r.low, r.high]


def distinct_precisions(precisions: tuple[str, ...], device: torch.device | str) -> list[str]:
    """``precisions`` resolved on ``device`` (``auto`` -> bf16, fp16 or fp32), each once.

    On a CPU without native bf16, ``("auto", "fp32")`` is just ``["fp32"]``: two
    contenders with the same precision would be the same figure twice.
    """
    from rlamd.device import describe_device
    from rlamd.precision import resolve_precision

    device = torch.device(device)
    native = describe_device(device).bf16
    out: list[str] = []
    for p in precisions:
        mode = resolve_precision(p, device, native)
        if mode not in out:
            out.append(mode)
    return out


def machine_info(device: torch.device) -> dict[str, Any]:
    """The machine, its software versions and the device, for a results file."""
    from rlamd.device import describe_device

    info = describe_device(device)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "hip": info.hip_version,
        "cuda": info.cuda_version,
        "device": info.to_dict(),
        "torch_threads": torch.get_num_threads(),
    }


def print_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    """A plain fixed-width table on stdout."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


# Host-side runtime calls that put work on a GPU queue (CUDA and HIP names; Triton
# launches through the driver API, cuLaunchKernel / hipModuleLaunchKernel).
_LAUNCH_CALLS = (
    "LaunchKernel",
    "GraphLaunch",
    "MemcpyAsync",
    "MemsetAsync",
    "hipMemcpyWithStream",
    "cudaMemcpy",
    "hipMemcpy",
    "hipMemset",
    "cudaMemset",
)


# Leaf ATen ops that only make views or allocate: no kernel on a GPU, no work on a CPU.
_NO_WORK = frozenset(
    f"aten::{n}"
    for n in (
        "empty",
        "empty_strided",
        "empty_like",
        "as_strided",
        "as_strided_",
        "view",
        "_reshape_alias",
        "reshape",
        "resize_",
        "resolve_conj",
        "resolve_neg",
        "_nnpack_available",
        "detach",
        "detach_",
        "alias",
        "t",
        "transpose",
        "permute",
        "expand",
        "unsqueeze",
        "squeeze",
        "select",
        "slice",
        "lift_fresh",
        "to",
        "_to_copy",
        "set_",
        "result_type",
        "is_nonzero",
        "unbind",
        "split",
        "chunk",
        "narrow",
        "flatten",
        "contiguous",
        "numpy_T",
        "item",
        "_local_scalar_dense",
        "squeeze_",
    )
)


@dataclass
class StepCost:
    """What one call of a step costs: queue submissions, kernels, host and device time.

    On the CPU ``kernels`` and ``launches`` count leaf ATen ops that do work (what would
    be kernels on a GPU; views and allocations excluded) and ``device_us`` is None.
    """

    launches: float
    """Host submissions per call (kernel launches, graph launches, copies; GPUs)."""
    kernels: float | None
    """Kernels (GPU; copies and fills not counted) or leaf ATen ops (CPU) per call; None
    when the profiler recorded no GPU activity at all (a profiler that stopped seeing
    the GPU, not a step without kernels)."""
    host_us: float
    """Host time to issue one call, without waiting for the GPU."""
    device_us: float | None
    """Summed GPU kernel time per call (None on the CPU, or with ``kernels`` None)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def cells(self) -> tuple[str, str, str, str]:
        """Kernels, launches, host µs and device µs as table cells ("-": not measured)."""

        def cell(x: float | None) -> str:
            return "-" if x is None else f"{x:,.0f}"

        return cell(self.kernels), cell(self.launches), cell(self.host_us), cell(self.device_us)


def step_cost(fn: Callable[[], Any], device: torch.device | str, iters: int = 10) -> StepCost:
    """Profile ``iters`` calls of ``fn`` (already warmed up) with ``torch.profiler``.

    One more call runs first inside the profiler, unrecorded (its warm-up step): some
    profiler versions drop the kernels at the start of a session.
    """
    from torch.autograd import DeviceType

    device = torch.device(device)
    gpu = device.type == "cuda"
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    host_us = (time.perf_counter() - t0) / iters * 1e6
    sync(device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if gpu:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    plan = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)
    with torch.profiler.profile(activities=activities, schedule=plan) as prof:
        fn()
        sync(device)
        prof.step()
        for _ in range(iters):
            fn()
        sync(device)
        prof.step()
    events = prof.events()
    if gpu:
        on_gpu = [e for e in events if e.device_type == DeviceType.CUDA]
        kernels = [e for e in on_gpu if not e.name.startswith(("Memcpy", "Memset"))]
        launches = [
            e
            for e in events
            if e.device_type == DeviceType.CPU and any(k in e.name for k in _LAUNCH_CALLS)
        ]
        if not on_gpu:
            return StepCost(len(launches) / iters, None, host_us, None)
        device_us = sum(e.time_range.elapsed_us() for e in kernels) / iters
        return StepCost(len(launches) / iters, len(kernels) / iters, host_us, device_us)
    leaves = [
        e
        for e in events
        if e.name.startswith("aten::")
        and e.name not in _NO_WORK
        and not any(c.name.startswith("aten::") for c in e.cpu_children)
    ]
    return StepCost(len(leaves) / iters, len(leaves) / iters, host_us, None)
