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
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

__all__ = ["RANGES", "Profile", "span"]

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
