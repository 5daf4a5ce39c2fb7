"""Timing helpers shared by every benchmark: warm-up excluded, medians of repeats."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

__all__ = ["Figure", "StepCost", "measure", "print_table", "step_cost", "sync"]


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
    """Time ``fn`` ``repeats`` times after ``warmup`` untimed calls.

    ``fn`` returns how many units of work it did (steps, updates). With ``per="rate"``
    the figure is work per second; with ``per="us"`` microseconds per unit of work.
    """
    for _ in range(warmup):
        fn()
    sync(device)
    values = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        work = fn()
        sync(device)
        dt = time.perf_counter() - t0
        values.append(work / dt if per == "rate" else dt / work * 1e6)
    return Figure(name, unit, statistics.median(values), min(values), max(values), values, meta)


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
