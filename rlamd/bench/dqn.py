"""DQN iterations/s on Breakout (an iteration: one env step and one update from replay, 1
env) and learner updates/s: rlamd's ``rlamd.train`` loop, and each peer in ``dqn`` with the
same batch, train frequency, Nature CNN, device and warm-up fill, in this process; beside
each, rlamd running the peer's algorithm (its ``dqn_algorithm``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from rlamd.graphs import Captured

from . import common as c

__all__ = ["Side", "run_dqn_suite"]


@dataclass
class Side:
    """A contender, built and filled: ``iterate`` runs ``iters`` iterations, ``learn``
    ``iters`` eager updates, ``learn_one`` one (profiled). The suite fills ``key``
    (``PEER_fp32``) and ``meta``; rlamd's rows (``rlamd_bf16``, ``rlamd_fp32_PEERalgo``) add
    ``learn_step`` (``agent.learn``, a graph on GPUs) and ``learn_step_one``; ``peer``: the
    peer, or whose algorithm the row runs."""

    who: str
    iterate: Callable[[], int]
    learn: Callable[[], int]
    learn_one: Callable[[], None]
    close: Callable[[], None]
    key: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    learn_step: Callable[[], int] | None = None
    learn_step_one: Callable[[], None] | None = None
    graphed: bool = False
    peer: Any = None


def rlamd_side(batch: int, precision: str, device, warm: int, iters: int, peer: Any = None) -> Side:
    """rlamd's loop after ``warm`` steps (with ``peer``'s algorithm when given); its learn
    step timed as the run captures it (a graph on GPUs) and eagerly."""
    train = {"env": "breakout", "num_envs": 1, "precision": precision, "device": str(device)}
    algo = peer.dqn_algorithm if peer else {}
    loop, agent = c.rlamd_loop(train, warm, batch_size=batch, train_frequency=1, **algo)
    mode, captured = agent.precision.mode, agent.learn_step
    eager = Captured(captured.fn, device, mode="off", name="dqn learn_step (eager)")

    def eager_step() -> None:  # the same learn step, never captured
        agent.learn_step = eager
        try:
            agent.learn(loop.buffer, batch, 0.4)
        finally:
            agent.learn_step = captured

    graph_step = partial(agent.learn, loop.buffer, batch, 0.4)  # as the run calls it
    c.repeat(graph_step, 5)()  # past the graph's warm-up and capture
    meta = {"device": str(device), "batch": batch, "precision": mode, "algorithm": "rlamd"}
    key, who = f"rlamd_{mode}", f"rlamd ({mode})"
    if peer is not None:
        meta["algorithm"], key = peer.name, f"{key}_{peer.name}algo"
        who = f"rlamd ({mode}, {peer.label} algorithm)"
    run, learn = c.repeat(loop.iterate, iters), c.repeat(eager_step, iters)
    side = Side(who, run, learn, eager_step, loop.collector.close, key, meta, peer=peer)
    side.learn_step, side.learn_step_one = c.repeat(graph_step, iters), graph_step
    side.graphed = captured.captured
    return side


_SUFFIX = {"iterate": "iterations", "learn": "learner", "learn_step": "learn_step"}


def _batch(batch: int, device: torch.device, sides: list[Side], repeats: int):
    """Interleaved figures for one batch size: (figures, table rows, step-cost rows, lines)."""
    own, got, costs = [s for s in sides if s.learn_step is not None], {}, []
    for what, who in (("iterate", sides), ("learn", sides), ("learn_step", own)):
        unit, contenders = "it/s" if what == "iterate" else "updates/s", []
        for s in who:  # each side's ``what`` as a contender
            meta = s.meta | ({"graph": s.graphed} if what == "learn_step" else {})
            run = c.timed(getattr(s, what), device=device)
            contenders.append(c.Contender(f"dqn/{s.key}/b{batch}/{_SUFFIX[what]}", unit, run, meta))
        got[what] = c.interleave(contenders, repeats=repeats)
    its, ups, grs = got["iterate"], got["learn"], got["learn_step"]
    timed_as = [(s, f, "eager", s.learn_one) for s, f in zip(sides, ups, strict=True)]
    for s, f in zip(own, grs, strict=True):
        timed_as.append((s, f, "graph" if s.graphed else "eager, agent.learn", s.learn_step_one))
    for s, f, how, step in timed_as:
        costs.append((s.who, how, str(batch), f"{f.median:.1f}", *c.step_cost(step, device, f)))
    base = its[0]
    rows = [
        (s.who, str(batch), f"{i.median:.1f}", f"{u.median:.1f}", c.ratio(i, base).text(""))
        for s, i, u in zip(sides, its, ups, strict=True)
    ]
    lines = []
    for i, s in enumerate(sides):
        if s.learn_step is not None:  # rlamd's rows; a peer's own row is followed by its twin
            continue
        for f, algo in ((base, ""), (its[i + 1], f", {s.peer.label}'s algorithm")):
            head = f"rlamd {f.meta['precision']}{algo} at batch {batch}: "
            lines += c.peer_lines(f, [(s.peer, its[i])], "iterations/s", head)
    return [*its, *ups, *grs], rows, costs, lines


def run_dqn_suite(
    batches: tuple[int, ...] = (32, 128),
    iters: int = 60,
    repeats: int = 3,
    device: torch.device | str = "cpu",
    precisions: tuple[str, ...] = ("auto", "fp32"),
    warm: int = 1_000,
    peers: bool = True,
    notes: list[str] | None = None,
) -> list[c.Figure]:
    device, notes = torch.device(device), [] if notes is None else notes
    figures, rows, costs, lines = [], [], [], []
    for b in batches:
        precs = c.distinct_precisions(precisions, device)
        sides = [rlamd_side(b, p, device, warm, iters) for p in precs]
        build = lambda p, b=b: p.dqn_side(b, device, warm, iters)  # noqa: E731
        for peer, side in c.each_peer("dqn", peers, notes, build):
            meta = {"batch": b, "device": str(device), "precision": "fp32", "algorithm": peer.name}
            side.key, side.meta, side.peer = f"{peer.name}_fp32", meta, peer
            sides += [side, rlamd_side(b, "fp32", device, warm, iters, peer=peer)]
        try:
            got = _batch(b, device, sides, repeats)
        finally:
            for s in sides:
                s.close()
        for acc, more in zip((figures, rows, costs, lines), got, strict=True):
            acc += more
    head = (
        f"dqn on {device}: Breakout, 1 env, one update per env step (median of {repeats} "
        f"interleaved rounds x {iters}; ratio = it/s / rlamd {precisions[0]}'s, median per round "
        "(min-max)). rlamd: prioritized 3-step double dueling DQN; a peer and rlamd with "
        "'PEER algorithm': the peer's DQN"
    )
    c.report(head, rows, ("framework", "batch", "iterations/s", "learner updates/s", "ratio"))
    cols = ("framework", "mode", "batch", "updates/s")
    c.report_costs("learn step (sample + update + priorities)", device, costs, cols, lines)
    return figures
