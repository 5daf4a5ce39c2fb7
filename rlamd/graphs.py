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
import inspect
import logging
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

__all__ = [
    "GRAPH_MODES",
    "Captured",
    "GraphStep",
    "capture_methods",
    "graph_refusal",
    "graph_status",
    "graphs_enabled",
    "release_methods",
    "resolve_graph_mode",
]

GRAPH_MODES = ("auto", "on", "off")

_log = logging.getLogger(__name__)


def graph_refusal(mode: str, device_type: str) -> tuple[str, str] | None:
    """Why graph ``mode`` cannot be used where updates run on ``device_type``, with what
    is accepted there: ``(why, accepted)``, or None. The one place this rule lives
    (:func:`resolve_graph_mode` and the configuration's device checks ask it)."""
    if mode == "on" and device_type != "cuda":
        where = "the CPU" if device_type == "cpu" else device_type
        return (
            f"graphs are captured on CUDA/ROCm GPUs and updates run on {where}",
            "auto or off there",
        )
    return None


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
    if graph_refusal(mode, device.type) is not None:
        raise ValueError(
            f"graph='on' needs a CUDA or ROCm GPU, and the device is {device}; "
            "accepted on this device: auto, off"
        )
    return mode != "off" and device.type == "cuda"


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


Generators = Iterable[torch.Generator] | Callable[..., Iterable[torch.Generator]]


class _Static:
    """One captured signature of a :class:`Captured` function: static copies of its
    tensor arguments, the :class:`GraphStep` that replays it, and what was copied last."""

    def __init__(self, owner: Captured, args: tuple) -> None:
        scalars = {id(t) for _, t in owner._scalars.values()}
        self.args = tuple(_static_like(a, scalars) for a in args)
        gens = owner.generators(*args) if callable(owner.generators) else owner.generators
        self.step = GraphStep(
            lambda: owner.fn(*self.args),
            owner.device,
            mode=owner.mode,
            name=owner.name,
            warmup=owner.warmup,
            generators=gens,
            log=owner.log,
        )
        self._copied: dict[int, tuple[Any, int]] = {}

    def __call__(self, args: tuple) -> Any:
        for i, (src, dst) in enumerate(_tensor_pairs(args, self.args)):
            if src is dst:
                continue
            ref, version = self._copied.get(i, (None, -1))
            # Unchanged since the last copy (same tensor, same version): nothing to copy.
            if ref is not None and ref() is src and src._version == version:
                continue
            dst.copy_(src)
            self._copied[i] = (weakref.ref(src), src._version)
        return self.step()


def _static_like(a: Any, keep: set[int]) -> Any:
    """A static buffer like ``a`` (tensors in ``keep``, the scalars, are their own)."""
    if isinstance(a, torch.Tensor):
        return a if id(a) in keep else torch.empty_like(a)
    if isinstance(a, tuple):
        items = [_static_like(x, keep) for x in a]
        return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
    return a


def _tensor_pairs(args: tuple, statics: tuple) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    for a, s in zip(args, statics, strict=True):
        if isinstance(a, torch.Tensor):
            yield a, s
        elif isinstance(a, tuple):
            yield from _tensor_pairs(a, s)


def _signature(a: Any) -> Any:
    """What must match for a call to replay a graph: tensors' shapes, dtypes and devices,
    tuples' contents, and any other argument itself (by value, or by identity)."""
    if isinstance(a, torch.Tensor):
        return ("T", tuple(a.shape), a.dtype, a.device)
    if isinstance(a, tuple):
        return (type(a), tuple(_signature(x) for x in a))
    try:
        hash(a)
    except TypeError:
        return ("id", id(a))
    return a


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_KW_ONLY = inspect.Parameter.KEYWORD_ONLY
_EMPTY = inspect.Parameter.empty


class Captured:
    """``fn(*args)`` run eagerly, or captured as one CUDA/HIP graph per call signature.

    The wrapper LeanRL's ``CudaGraphModule`` stands for: a plain function of tensors
    goes in, the same function comes out, and the code that calls it never knows. It
    owns what capture needs:

    * **scalars**: a Python ``float`` argument becomes a 0-d float64 tensor on the device,
      kept per argument position and refilled (one tiny copy) only when the value
      changes, in every mode, so ``fn`` sees the same types on every device;
    * **static inputs** (graphs only): each signature (tensor shapes/dtypes/devices and
      the other arguments' values) gets static copies of its tensor arguments (also
      inside tuples and NamedTuples); a call copies its tensors into them, skipping a
      tensor that is the one copied last time and unchanged since (same version);
    * **warm-up, capture, replay, the eager fallback** with one log line, and the
      registration of the generators ``fn`` draws from (:class:`GraphStep`);
    * at most ``max_graphs`` signatures are captured; others run eagerly.

    ``fn`` must follow :class:`GraphStep`'s rules, and the value it returns is, under
    capture, overwritten by the next replay of the same signature.

    Args:
        fn: the step.
        device: where its tensors live.
        mode: ``auto``, ``on`` or ``off`` (:func:`resolve_graph_mode`).
        name: for log lines.
        generators: device generators ``fn`` draws from, or a function of the call's
            arguments that returns them (e.g. ``lambda buffer, *_: [buffer.generator]``).
        log: called with one line when a capture fails.
        max_graphs: signatures captured at most.
        warmup: eager calls before each capture.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        device: torch.device | str,
        *,
        mode: str = "auto",
        name: str = "step",
        generators: Generators = (),
        log: Callable[[str], None] | None = None,
        max_graphs: int = 4,
        warmup: int = 3,
    ) -> None:
        self.fn, self.name, self.mode, self.log = fn, name, mode, log
        self.device = torch.device(device)
        self.capture = graphs_enabled(mode, self.device)
        self.generators, self.max_graphs, self.warmup = generators, max_graphs, warmup
        self._scalars: dict[int, tuple[float, torch.Tensor]] = {}
        self._statics: dict[tuple, _Static] = {}
        self._why_eager: str | None = None if self.capture else f"graph mode {mode!r} on {device}"
        try:
            self._params: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):  # some builtins have none: positions only
            self._params = None
        params = self._params.parameters.values() if self._params else ()
        self._defaults = tuple(p.default for p in params if p.kind in _POSITIONAL)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs or len(args) < len(self._defaults):
            args = self._positional(args, kwargs)
        args = tuple(self._scalar(i, a) if type(a) is float else a for i, a in enumerate(args))
        if not self.capture:
            return self.fn(*args)
        key = tuple(_signature(a) for a in args)
        static = self._statics.get(key)
        if static is None:
            if len(self._statics) >= self.max_graphs:
                return self.fn(*args)
            static = self._statics[key] = _Static(self, args)
        return static(args)

    def _positional(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """Every positional parameter by position, defaults filled in: ``act(obs)``,
        ``act(obs, False)`` and ``act(obs, greedy=False)`` are one signature, one graph."""
        missing = self._defaults[len(args) :]
        if not kwargs and _EMPTY not in missing:  # the usual case, act(obs): no binding
            return args + missing
        if self._params is None:  # no signature: no positions, so kwargs were given
            raise TypeError(f"{self.name}: takes positions only; got {sorted(kwargs)}")
        bound = self._params.bind(*args, **kwargs)
        named = self._params.parameters
        kw_only = sorted(k for k in kwargs if k not in named or named[k].kind is _KW_ONLY)
        if kw_only:  # keyword-only parameters or **kwargs: no position to key them by
            raise TypeError(
                f"{self.name}: keyword-only {kw_only} cannot be captured; "
                "accepted: parameters that can be passed by position"
            )
        bound.apply_defaults()
        return bound.args

    def _scalar(self, position: int, value: float) -> torch.Tensor:
        last, t = self._scalars.get(position, (None, None))
        if t is None:
            t = torch.empty((), dtype=torch.float64, device=self.device)
        if value != last:
            t.fill_(value)
            self._scalars[position] = (value, t)
        return t

    @property
    def captured(self) -> bool:
        """True when every signature seen so far replays a graph."""
        return bool(self._statics) and all(s.step.captured for s in self._statics.values())

    @property
    def status(self) -> str:
        """``graph`` or ``eager (why)``, for logs."""
        if self.captured:
            return "graph"
        why = self._why_eager or next(
            (s.step.why_eager for s in self._statics.values() if s.step.why_eager), None
        )
        return f"eager ({why or 'not captured yet'})"

    def disable(self, reason: str) -> None:
        """Run eagerly from now on (e.g. when gradients start crossing processes)."""
        self.capture = False
        self._why_eager = reason
        self._statics.clear()


def capture_methods(
    obj: Any,
    device: torch.device | str,
    mode: str,
    log: Callable[[str], None] | None = None,
    **methods: Generators,
) -> Any:
    """Wrap ``obj``'s methods named in ``methods`` in :class:`Captured` (instance
    attributes shadowing the methods), each with the generators given; returns ``obj``.

    The one place where an agent's steps are made capturable (the algorithm's
    ``build_agent`` calls it); the agent keeps calling ``self.act``, ``self.learn_step``
    and so on, and never knows.
    """
    kind = type(obj).__name__.lower()
    for name, gens in methods.items():
        fn = getattr(obj, name)
        setattr(
            obj,
            name,
            Captured(fn, device, mode=mode, name=f"{kind} {name}", generators=gens, log=log),
        )
    return obj


def release_methods(obj: Any, reason: str) -> None:
    """Run every :class:`Captured` method of ``obj`` eagerly from now on."""
    for value in vars(obj).values():
        if isinstance(value, Captured):
            value.disable(reason)


def graph_status(obj: Any) -> dict[str, str]:
    """``{method: "graph" | "eager (why)"}`` for ``obj``'s captured methods (for logs)."""
    return {
        name.split(" ", 1)[-1]: v.status
        for name, v in ((v.name, v) for v in vars(obj).values() if isinstance(v, Captured))
    }
