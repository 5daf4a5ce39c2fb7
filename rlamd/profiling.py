"""Profiling: named ranges for the training loop and a ``torch.profiler`` trace of N steps.

Ranges (``act``, ``env``, ``add``, ``learn`` holding ``sample``, ``update`` and
``priorities``, see :data:`RANGES`) come from :func:`span`. While a :class:`Profile` records they appear in
its trace (``torch.profiler.record_function``); on a GPU they are also NVTX ranges
(``torch.cuda.nvtx``), which Nsight Systems shows and which ROCm's profilers show as
roctx ranges (PyTorch's ROCm build routes NVTX calls to roctx). When nothing records,
``span`` costs one attribute check.

The trace is a Chrome trace JSON file, ``<run>/profile/rlamd.pt.trace.json``: Perfetto
(https://ui.perfetto.dev) and ``chrome://tracing`` open it, and TensorBoard's profiler
plugin (``torch-tb-profiler``) lists it as run ``profile`` of ``tensorboard --logdir <run>``
(it looks for ``*.pt.trace.json``).

:func:`call_cost` measures what one call costs: the kernels it runs (on a CPU, the leaf ATen
ops doing work), the host submissions it makes and the time to issue it; the bench's learner
tables read it, and a GPU test that a captured step makes a tenth of eager's launches.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

__all__ = ["LAUNCH_CALLS", "RANGES", "Profile", "call_cost", "span", "sync"]

RANGES = ("act", "env", "add", "learn", "sample", "update", "priorities")
"""The range names the training loop marks."""


class _State:
    profiling = False
    nvtx = False


def _nvtx_available() -> bool:
    try:
        return torch.cuda.is_available() and hasattr(torch.cuda, "nvtx")
    except Exception:  # pragma: no cover - broken driver
        return False


@contextlib.contextmanager
def _ranged(name: str) -> Iterator[None]:
    pushed = False
    if _State.nvtx:
        torch.cuda.nvtx.range_push(name)
        pushed = True
    try:
        if _State.profiling:
            with torch.profiler.record_function(name):
                yield
        else:
            yield
    finally:
        if pushed:
            torch.cuda.nvtx.range_pop()


_NULL = contextlib.nullcontext()


def span(name: str) -> contextlib.AbstractContextManager[Any]:
    """A named range around a piece of the loop; a shared no-op unless a :class:`Profile`
    records or NVTX ranges are on (:meth:`Profile.enable_nvtx`)."""
    if _State.profiling or _State.nvtx:
        return _ranged(name)
    return _NULL


class Profile:
    """Record ``steps`` loop steps with ``torch.profiler`` and write the trace.

    Call :meth:`step` at the start of every loop iteration (one vector env step, with
    the updates due): it lets ``skip`` iterations pass, records the next ``steps``, then
    stops and writes ``folder/rlamd.pt.trace.json``. Call :meth:`stop` (or leave the
    ``with`` block) at the end of the run in case it ends first. With ``steps == 0`` it
    does nothing at all.

    Args:
        folder: where the trace goes (created), e.g. ``runs/NAME/profile``.
        steps: iterations to record (>= 0).
        device: the training device; CUDA/HIP activity is recorded on a GPU.
        skip: iterations to let pass first (warm-up, graph capture).
        nvtx: also emit NVTX/roctx ranges (GPUs) while recording, for Nsight/rocprof.
        log: called with one line when the trace is written.

    Raises:
        ValueError: ``steps`` or ``skip`` < 0.
    """

    def __init__(
        self,
        folder: str | Path,
        steps: int,
        device: torch.device | str = "cpu",
        *,
        skip: int = 0,
        nvtx: bool = True,
        log: Any = print,
    ) -> None:
        if steps < 0 or skip < 0:
            raise ValueError(f"profile steps={steps}, skip={skip}; accepted: integers >= 0")
        self.folder, self.steps, self.skip = Path(folder), steps, skip
        self.device = torch.device(device)
        self.nvtx = nvtx and self.device.type == "cuda" and _nvtx_available()
        self.log = log
        self._seen = 0
        self._prof: Any = None
        self.path: Path | None = None
        """The trace file, once written."""

    @property
    def active(self) -> bool:
        return self._prof is not None

    @property
    def done(self) -> bool:
        return self.path is not None or self.steps == 0

    def step(self) -> None:
        """Mark the start of one loop iteration (cheap when done or disabled)."""
        if self.done:
            return
        if self._prof is None:
            if self._seen >= self.skip:
                self._start()
            self._seen += 1
            return
        self._seen += 1
        if self._seen >= self.skip + self.steps + 1:
            self.stop()

    def _start(self) -> None:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._prof = torch.profiler.profile(activities=activities, record_shapes=False)
        self._prof.__enter__()
        _State.profiling, _State.nvtx = True, self.nvtx

    def stop(self) -> Path | None:
        """Stop recording now and write the trace (also at the end of a short run)."""
        if self._prof is None:
            return self.path
        _State.profiling = _State.nvtx = False
        prof, self._prof = self._prof, None
        prof.__exit__(None, None, None)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "rlamd.pt.trace.json"
        prof.export_chrome_trace(str(self.path))
        self.log(
            f"profile: {self._seen - self.skip - 1} steps written to {self.path} "
            "(open in https://ui.perfetto.dev or TensorBoard's profiler plugin)"
        )
        return self.path

    def __enter__(self) -> Profile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


LAUNCH_CALLS = ("LaunchKernel", "GraphLaunch", "MemcpyAsync", "MemsetAsync", "hipMemcpy")
LAUNCH_CALLS += ("cudaMemcpy", "hipMemset", "cudaMemset")
"""Host calls that queue GPU work (CUDA and HIP names; Triton launches through the driver)."""

_NO_WORK = frozenset(
    f"aten::{n}"
    for n in (
        "empty empty_strided empty_like as_strided as_strided_ view _reshape_alias reshape "
        "resize_ resolve_conj resolve_neg _nnpack_available detach detach_ alias t transpose "
        "permute expand unsqueeze squeeze squeeze_ select slice lift_fresh to _to_copy set_ "
        "result_type is_nonzero unbind split chunk narrow flatten contiguous numpy_T item "
        "_local_scalar_dense view_as expand_as reshape_as broadcast_to movedim moveaxis swapaxes "
        "swapdims unflatten split_with_sizes unsafe_split _unsafe_view type_as diagonal unsqueeze_ "
        "broadcast_tensors new_empty"
    ).split()
)
"""Leaf ATen ops that only make views or allocate: no kernel on a GPU, no work on a CPU."""


def sync(device: torch.device | str | None) -> None:
    """Wait for queued GPU work so a timer measures it (a no-op on the CPU or for None)."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def call_cost(fn: Callable[[], object], device: torch.device | str, iters: int = 10) -> dict:
    """What one call of ``fn`` costs on ``device``, over ``iters`` profiled calls (after one
    unrecorded: some profilers drop a session's first kernels): ``kernels`` (GPU kernels run,
    copies and fills aside; None when no GPU activity was seen), ``launches`` (host calls in
    :data:`LAUNCH_CALLS`), ``host_us`` (host time to issue it, without waiting) and
    ``device_us`` (its kernels' time). On a CPU ``kernels`` and ``launches`` both count the
    leaf ATen ops doing work and ``device_us`` is None."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, schedule

    device = torch.device(device)
    gpu = device.type == "cuda"
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    host_us = (time.perf_counter() - t0) / iters * 1e6
    sync(device)
    acts = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if gpu else [])]
    with profile(activities=acts, schedule=schedule(wait=0, warmup=1, active=1, repeat=1)) as prof:
        for n in (1, iters):
            for _ in range(n):
                fn()
            sync(device)
            prof.step()
    events = prof.events()
    if not gpu:
        aten = [e for e in events if e.name.startswith("aten::") and e.name not in _NO_WORK]
        inner = set()  # ops with one doing work below them (``mm``'s ``resolve_conj`` is not)
        for e in aten:
            while (e := e.cpu_parent) is not None:
                inner.add(id(e))
        leaves = [e for e in aten if id(e) not in inner]
        ops = len(leaves) / iters
        return {"launches": ops, "kernels": ops, "host_us": host_us, "device_us": None}
    on_gpu = [e for e in events if e.device_type == DeviceType.CUDA]
    kernels = [e for e in on_gpu if not e.name.startswith(("Memcpy", "Memset"))]
    host = [e for e in events if e.device_type == DeviceType.CPU]
    launches = sum(any(k in e.name for k in LAUNCH_CALLS) for e in host) / iters
    seen = bool(on_gpu)
    return {
        "launches": launches,
        "kernels": len(kernels) / iters if seen else None,
        "host_us": host_us,
        "device_us": sum(e.time_range.elapsed_us() for e in kernels) / iters if seen else None,
    }
