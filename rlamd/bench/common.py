"""The measurement core every suite uses: warm-up excluded, contenders interleaved
(A B A B ...) so a drifting machine hits all alike, medians of repeats, ratios per round with
their spread, the peers each measurement takes part in, step costs, tables and charts."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from rlamd.device import describe_device
from rlamd.precision import resolve_precision
from rlamd.profiling import call_cost, sync

from .peer import Peer, PeerUnavailable, peers

__all__ = ["MIN_REPEATS", "Contender", "Figure", "Ratio", "each_peer", "interleave", "measure"]

MIN_REPEATS = 3  # timed rounds the command line gives every compared figure


def repeat(step: Callable[[], object], n: int, work: float | None = None) -> Callable[[], float]:
    """A call running ``step`` ``n`` times, returning ``work`` (default ``n``) units."""

    def run() -> float:
        for _ in range(n):
            step()
        return n if work is None else work

    return run


@dataclass
class Figure:
    """One measured quantity: the median of repeats, min, max and the raw values."""

    name: str
    unit: str
    median: float
    min: float
    max: float
    repeats: list[float] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, name: str, unit: str, values: list[float], **meta: Any) -> Figure:
        return cls(name, unit, statistics.median(values), min(values), max(values), values, meta)


@dataclass(frozen=True)
class Contender:
    """What :func:`interleave` times: ``run`` one repeat returning the figure's value
    (:func:`timed`), ``warmup`` what runs untimed before the first round (default ``run``)."""

    name: str
    unit: str
    run: Callable[[], float]
    meta: dict[str, Any] = field(default_factory=dict)
    warmup: Callable[[], object] | None = None


def timed(fn: Callable[[], float], *, device: Any = None, per: str = "rate") -> Callable[[], float]:
    """A repeat timing one call of ``fn`` (returning its units of work): units/s (``"rate"``),
    µs per unit (``"us"``), or ``fn``'s own figure (``"self"``); GPU work is waited for."""
    if per not in ("rate", "us", "self"):
        raise ValueError(f"per={per!r}; accepted: 'rate', 'us' or 'self'")
    if per == "self":
        return fn

    def run() -> float:
        sync(device)
        t0 = time.perf_counter()
        work = fn()
        sync(device)
        dt = time.perf_counter() - t0
        return work / dt if per == "rate" else dt / work * 1e6

    return run


def interleave(contenders: list[Contender], *, repeats: int, warmup: int = 1) -> list[Figure]:
    """``repeats`` rounds of A B C ... after ``warmup`` untimed calls: a :class:`Figure` per
    contender, its repeats in round order (what :func:`ratio` divides)."""
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
    out = []
    for c, vs in zip(contenders, values, strict=True):
        others = {"interleaved_with": [n for n in names if n != c.name]} if len(names) > 1 else {}
        out.append(Figure.of(c.name, c.unit, vs, repeats=repeats, **c.meta, **others))
    return out


def measure(name: str, unit: str, fn: Callable[[], float], repeats: int = 5, **meta: Any) -> Figure:
    """One figure alone (``device`` and ``per`` in ``meta`` go to :func:`timed`)."""
    run = timed(fn, device=meta.pop("device", None), per=meta.pop("per", "rate"))
    return interleave([Contender(name, unit, run, meta)], repeats=repeats)[0]


@dataclass(frozen=True)
class Ratio:
    """``a / b`` per round of an interleaved measurement: its median and spread."""

    median: float
    low: float
    high: float

    def text(self, x: str = "x") -> str:
        """``1.55x (1.40-1.62)``: the median ratio and the range over rounds (``x=""``: a cell)."""
        return f"{self.median:.2f}{x} ({self.low:.2f}-{self.high:.2f})"


def ratio(a: Figure, b: Figure, key: str | None = None) -> Ratio:
    """``a / b`` round by round (into ``a.meta[key]`` and ``key_range`` when given);
    ValueError for figures not from one :func:`interleave`."""
    if len(a.repeats) != len(b.repeats) or not a.repeats:
        raise ValueError(
            f"{a.name} has {len(a.repeats)} repeats and {b.name} {len(b.repeats)}; a ratio "
            "per round needs two figures from one interleave() call"
        )
    # A contender that did nothing in a round (a starved child) gives no ratio, not a crash.
    rounds = tuple(x / y if y else math.nan for x, y in zip(a.repeats, b.repeats, strict=True))
    ok = [x for x in rounds if not math.isnan(x)] or [math.nan]
    r = Ratio(statistics.median(ok), min(ok), max(ok))
    if key is not None:
        a.meta[key], a.meta[f"{key}_range"] = r.median, [r.low, r.high]
    return r


def each_peer(measurement: str, on: bool, notes: list[str], build: Callable[[Peer], Any]) -> list:
    """``[(peer, build(peer))]`` per peer in ``measurement``; an unavailable one, a note."""
    built = []
    for peer in peers(measurement) if on else []:
        try:
            if (reason := peer.unavailable()) is not None:
                raise PeerUnavailable(reason)
            built.append((peer, build(peer)))
        except PeerUnavailable as exc:
            notes.append(f"{peer.label} skipped: {exc}")
    return built


def peer_lines(base: Figure, peer_figs: list, what: str, head: str = "") -> list[str]:
    """``base / peer`` per round into ``base.meta["ratio_to_NAME"]``; one line each."""
    lines = []
    for peer, f in peer_figs:
        r = ratio(base, f, f"ratio_to_{peer.name}")
        rounds = f"rounds {r.low:.2f}-{r.high:.2f}"
        lines.append(f"{head}{r.median:.2f}x {peer.label}'s {what} ({rounds})")
    return lines


def report(head: str, rows: list, header: tuple[str, ...], lines: list[str] = ()) -> None:
    print(f"\n{head}")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    print(f"{line}\n{'-' * len(line)}")
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))
    for text in lines:
        print(text)


def distinct_precisions(precisions: tuple[str, ...], device: torch.device | str) -> list[str]:
    """``precisions`` resolved on ``device`` (``auto`` -> bf16, fp16 or fp32), each once."""
    device = torch.device(device)
    native = describe_device(device).bf16
    return list(dict.fromkeys(resolve_precision(p, device, native) for p in precisions))


def rlamd_loop(train: dict[str, Any], warm: int, **dqn: Any) -> tuple[Any, Any]:
    """rlamd's loop and agent as ``rlamd.train`` builds them from ``train`` (``TrainConfig``
    fields); DQN's replay (50k, ``dqn`` fields) filled with ``warm`` steps."""
    from rlamd.agents.dqn import DQNConfig
    from rlamd.algos import build_agent, get_algorithm
    from rlamd.collector import Collector
    from rlamd.config.sections import RunConfig, TrainConfig
    from rlamd.envs import make_env

    t = TrainConfig(**{"steps": 10**7, **train})
    cfg = RunConfig(t, dqn=replace(DQNConfig(), learning_starts=warm, buffer_size=50_000, **dqn))
    device, env = torch.device(t.device), make_env(t.env, num_envs=t.num_envs, threads=t.threads)
    agent, collector = build_agent(cfg, device, env), Collector(env, device, seed=0)
    loop = get_algorithm(t.algo).local_loop(cfg, collector, agent, 0, lambda _line: None)
    while t.algo == "dqn" and loop.step < warm:
        loop.iterate()
    return loop, agent


def write_results(out: Path, doc: dict[str, Any], busy: str, why: str) -> Path:
    """``out/results.json`` (``doc``: machine, figures, and the ``notes``, ``charts`` and
    ``seconds`` this prints); then the notes, a warning when ``busy`` names what ran on a busy
    machine (``why``: where its load is, what it did to the figures), what was written."""
    path = out / "results.json"
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    for n in doc["notes"]:
        print(f"note: {n}")
    if busy:
        print(f"warning: the machine was busy during {busy} ({why})")
    charts = f" and {', '.join(doc['charts'])}" if doc["charts"] else ""
    print(f"wrote {path}{charts} in {doc['seconds']:.0f} s")
    return path


def report_costs(what: str, device: Any, rows: list, columns: tuple, lines: list = ()) -> None:
    gpu = torch.device(device).type == "cuda"
    unit, ran = ("kernels", "GPU kernels run") if gpu else ("ops", "leaf ATen ops doing work")
    head = f"per {what} on {device} (torch.profiler; {unit}: {ran}; launches: host "
    head += "submissions; host µs: time to issue it)"
    report(head, rows, (*columns, unit, "launches", "host µs", "device µs"), lines)


def step_cost(fn: Callable[[], Any], device: torch.device | str, into: Figure) -> tuple[str, ...]:
    """One call's cost (:func:`rlamd.profiling.call_cost`) into ``into.meta``; its table
    cells (``-``: not measured) returned."""
    cost = call_cost(fn, device)
    into.meta.update(cost)
    vals = (cost["kernels"], cost["launches"], cost["host_us"], cost["device_us"])
    return tuple("-" if x is None else f"{x:,.0f}" for x in vals)
