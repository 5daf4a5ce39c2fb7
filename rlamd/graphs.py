"""CUDA/HIP graph capture of whole steps: the one place in rlamd where capture lives.

A *step* is a Python callable without arguments that reads its inputs from tensors that
live as long as the step (static buffers: the networks, the optimizer state, the replay
storage, 0-d device tensors holding per-step scalars such as epsilon, beta or the
learning rate) and writes its results into tensors as well. :class:`GraphStep` runs such a
step either eagerly (every call runs the Python code, on any device) or, on a GPU,
captures it once into a ``torch.cuda.CUDAGraph`` (PyTorch maps it to a hipGraph on ROCm)
and replays it: one launch instead of hundreds.

The same callable runs in both modes, so the CPU tests exercise the code that a GPU
captures. Rules a step must follow to be capturable (PyTorch's CUDA Graphs notes,
https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs):

* no host synchronisation (``.item()``, ``bool(tensor)``, ``print`` of a tensor, boolean
  masks that produce data-dependent shapes) and no Python branch on a device value;
* fixed shapes, and inputs read from the same tensors (same addresses) on every call:
  copy new data *into* static buffers before the call, never rebind them;
* random numbers from generators passed to :class:`GraphStep` (their state advances on
  every replay);
* optimizers built with ``capturable=True`` (see :func:`rlamd.precision.make_optimizer`).

Host-side bookkeeping (Python counters, logging) must stay outside the step: during a
replay no Python code runs.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable
from typing import Any

import torch

__all__ = ["GRAPH_MODES", "GraphStep", "graphs_enabled", "resolve_graph_mode"]

GRAPH_MODES = ("auto", "on", "off")

_log = logging.getLogger(__name__)


def resolve_graph_mode(mode: str, device: torch.device | str) -> bool:
    """Whether steps on ``device`` are captured for ``mode`` (``auto``, ``on`` or ``off``).

    ``auto`` captures on a CUDA or ROCm GPU and never on the CPU; ``on`` insists on a GPU.

    Raises:
        ValueError: an unknown mode, or ``on`` for a device that is not a GPU.
    """
    if mode not in GRAPH_MODES:
        close = difflib.get_close_matches(str(mode), GRAPH_MODES, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ValueError(f"graph={mode!r}; accepted: {', '.join(GRAPH_MODES)}{hint}")
    device = torch.device(device)
    if mode == "off":
        return False
    if device.type != "cuda":
        if mode == "on":
            raise ValueError(
                f"graph='on' needs a CUDA or ROCm GPU, and the device is {device}; "
                "accepted on this device: auto, off"
            )
        return False
    return True


def graphs_enabled(mode: str, device: torch.device | str) -> bool:
    """:func:`resolve_graph_mode`, also False when this torch cannot capture graphs."""
    return resolve_graph_mode(mode, device) and torch.cuda.is_available()


class GraphStep:
    """Run a step eagerly, or capture it into a CUDA/HIP graph once and replay it.

    Every call performs exactly one step. With capture on, the first ``warmup`` calls run
    eagerly on a side stream (PyTorch's recipe: it lets lazily created state, such as
    optimizer moments, cuBLAS workspaces and autograd buffers, exist before capture);
    the next call captures the step and replays it once; later calls only replay. If
    capture fails, the step runs eagerly from then on and the reason is logged once.

    The value the step returns is returned by every call. Under capture it is the same
    tensor(s) every time, overwritten by the next replay: read or copy it before the
    next call.

    Args:
        fn: the step (see the module docstring for what capture requires).
        device: where the step's tensors live.
        mode: ``auto``, ``on`` or ``off`` (see :func:`resolve_graph_mode`).
        name: for log lines.
        warmup: eager calls before the capture (>= 1).
        generators: device generators the step draws from; registered with the graph
            so that each replay draws fresh numbers.
        log: called with one line when capture fails (default: this module's logger).

    Raises:
        ValueError: bad ``mode`` for ``device`` or ``warmup`` < 1.
    """

    def __init__(
        self,
        fn: Callable[[], Any],
        device: torch.device | str,
        *,
        mode: str = "auto",
        name: str = "step",
        warmup: int = 3,
        generators: Iterable[torch.Generator] = (),
        log: Callable[[str], None] | None = None,
    ) -> None:
        if warmup < 1:
            raise ValueError(f"warmup={warmup}; accepted: an integer >= 1")
        self.fn, self.name, self.warmup = fn, name, warmup
        self.device = torch.device(device)
        self.capture = resolve_graph_mode(mode, self.device)
        if self.capture and not torch.cuda.is_available():
            self.capture = False
            self._why_eager: str | None = "this torch has no CUDA/HIP runtime"
        else:
            self._why_eager = None if self.capture else f"graph mode {mode!r} on {self.device}"
        self.generators = [g for g in generators if g.device.type == "cuda"]
        self._log = log or _log.warning
        self._calls = 0
        self._graph: Any = None
        self._out: Any = None
        self._stream: Any = None

    @property
    def captured(self) -> bool:
        """True once the step is a graph that calls replay."""
        return self._graph is not None

    @property
    def why_eager(self) -> str | None:
        """Why the step runs eagerly (None while capture is planned or done)."""
        return self._why_eager

    def __call__(self) -> Any:
        if self._graph is not None:
            self._graph.replay()
            return self._out
        if not self.capture:
            return self.fn()
        self._calls += 1
        if self._calls <= self.warmup:
            return self._side_stream(self.fn)
        return self._capture_and_replay()

    def _side_stream(self, fn: Callable[[], Any]) -> Any:
        if self._stream is None:
            self._stream = torch.cuda.Stream(self.device)
        current = torch.cuda.current_stream(self.device)
        self._stream.wait_stream(current)
        with torch.cuda.stream(self._stream):
            out = fn()
        current.wait_stream(self._stream)
        return out

    def _capture_and_replay(self) -> Any:
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.current_stream(self.device)
        # Pre-capture generator states: a failed capture can leave a generator marked as
        # capturing (its epilogue never runs), which eager draws then refuse.
        saved = [g.clone_state() if hasattr(g, "clone_state") else None for g in self.generators]
        try:
            for g in self.generators:
                graph.register_generator_state(g)
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                out = self.fn()
        except Exception as exc:  # any capture failure: keep training, eagerly
            # torch.cuda.graph's exit fails before it restores the stream when the capture
            # was invalidated; the first error (a sync in the step, say) is the cause.
            torch.cuda.set_stream(stream)
            for g, state in zip(self.generators, saved, strict=True):
                if state is not None:
                    g.graphsafe_set_state(state)
            cause = exc.__context__ or exc
            self.disable(f"capture failed: {type(cause).__name__}: {cause}".splitlines()[0])
            torch.cuda.synchronize(self.device)
            return self.fn()
        self._graph, self._out = graph, out
        graph.replay()
        return out

    def disable(self, reason: str) -> None:
        """Run eagerly from now on; logs ``reason`` once."""
        if self._why_eager is None:
            self._log(f"graph {self.name}: {reason}; running it eagerly from now on")
        self._why_eager = reason
        self.capture = False
        self._graph = self._out = None
