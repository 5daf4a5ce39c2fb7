"""DQN iterations/s on Breakout and learner updates/s: rlamd and every peer in ``dqn``.

An *iteration* is one update on a batch sampled from prioritized replay plus the env steps
collected for it: here one env, one update per env step. rlamd runs
:class:`rlamd.loops.OffPolicyLoop`, the loop ``python -m rlamd.train`` runs; each peer runs
its DQN with the same batch, train frequency, network (Nature CNN) and 1 env, in this
process on the same device, after both buffers hold the same warm-up transitions. A
like-for-like row per peer runs rlamd with the peer's algorithm (its ``dqn_algorithm``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from .common import (
    Contender,
    Figure,
    distinct_precisions,
    each_peer,
    interleave,
    ratio,
    repeat,
    report,
    step_cost,
    timed,
)

__all__ = ["Side", "run_dqn_suite"]

GAME = "breakout"


@dataclass
class Side:
    """One contender, built and filled: what each of its figures runs (``iters`` units)."""

    who: str
    key: str
    """Figure-name part: ``rlamd_bf16``, ``PEER_fp32``, ``rlamd_fp32_PEERalgo``."""
    meta: dict[str, Any]
    iterate: Callable[[], int]
    """``iters`` iterations (env step, store, update)."""
    learn: Callable[[], int]
    """``iters`` eager learner updates."""
    learn_one: Callable[[], None]
    """One eager learner update (profiled for its cost)."""
    close: Callable[[], None]
    learn_step: Callable[[], int] | None = None
    """rlamd: ``iters`` calls of ``agent.learn`` (a captured graph on GPUs)."""
    learn_step_one: Callable[[], None] | None = None
    graphed: bool = False
    peer: Any = None
    """The peer this row is (or whose algorithm rlamd runs here)."""


def _loop(batch: int, precision: str, device: torch.device, warm: int, **algo: Any):
    from rlamd.agents.dqn import DQNConfig
    from rlamd.algos import build_agent
    from rlamd.algos.dqn_replay import build_replay
    from rlamd.collector import Collector
    from rlamd.config.sections import RunConfig, TrainConfig
    from rlamd.envs import make_env
    from rlamd.loops import OffPolicyLoop

    cfg = replace(
        DQNConfig(),
        batch_size=batch,
        train_frequency=1,
        learning_starts=warm,
        buffer_size=50_000,
        **algo,
    )
    train = TrainConfig(env=GAME, num_envs=1, precision=precision, device=str(device), steps=10**7)
    env = make_env(GAME, num_envs=1)
    agent = build_agent(RunConfig(train=train, dqn=cfg), device, env)
    buf = build_replay(cfg, env, device, seed=0)
    loop = OffPolicyLoop(Collector(env, device, seed=0), buf, agent, cfg, train.steps)
    while loop.step < warm:
        loop.iterate()
    return loop, agent


def rlamd_side(batch: int, precision: str, device, warm: int, iters: int, peer: Any = None) -> Side:
    """rlamd's loop after ``warm`` steps, with ``peer``'s algorithm when given (the
    like-for-like row). The learn step is timed as the run captures it (a graph on GPUs)
    and eagerly (the same function)."""
    from rlamd.graphs import Captured

    loop, agent = _loop(batch, precision, device, warm, **(peer.dqn_algorithm() if peer else {}))
    mode, captured = agent.precision.mode, agent.learn_step
    eager = Captured(captured.fn, device, mode="off", name="dqn learn_step (eager)")

    def eager_step() -> None:  # the same learn step, never captured
        agent.learn_step = eager
        try:
            agent.learn(loop.buffer, batch, 0.4)
        finally:
            agent.learn_step = captured

    def graph_step() -> None:  # as the run calls it: a graph on GPUs
        agent.learn(loop.buffer, batch, 0.4)

    repeat(graph_step, 5)()  # past the graph's warm-up and capture
    meta = {"device": str(device), "batch": batch, "precision": mode, "algorithm": "rlamd"}
    key, who = f"rlamd_{mode}", f"rlamd ({mode})"
    if peer is not None:
        meta["algorithm"], key = peer.name, f"{key}_{peer.name}algo"
        who = f"rlamd ({mode}, {peer.label} algorithm)"
    return Side(
        who,
        key,
        meta,
        repeat(loop.iterate, iters),
        repeat(eager_step, iters),
        eager_step,
        loop.collector.close,
        repeat(graph_step, iters),
        graph_step,
        captured.captured,
        peer,
    )


def _batch(batch: int, device: torch.device, sides: list[Side], repeats: int):
    """Interleaved figures for one batch size: (figures, table rows, step-cost rows, lines)."""
    own = [s for s in sides if s.learn_step is not None]
    got = {}
    for what, unit, who in (
        ("iterate", "it/s", sides),
        ("learn", "updates/s", sides),
        ("learn_step", "updates/s", own),
    ):
        suffix = {"iterate": "iterations", "learn": "learner"}.get(what, what)
        got[what] = interleave(
            [
                Contender(
                    f"dqn/{s.key}/b{batch}/{suffix}",
                    unit,
                    timed(getattr(s, what), device=device),
                    s.meta | ({"graph": s.graphed} if what == "learn_step" else {}),
                )
                for s in who
            ],
            repeats=repeats,
        )
    its, ups, grs = got["iterate"], got["learn"], got["learn_step"]
    costs = []
    timed_as = [(s, f, "eager", s.learn_one) for s, f in zip(sides, ups, strict=True)]
    for s, f in zip(own, grs, strict=True):
        timed_as.append((s, f, "graph" if s.graphed else "eager, agent.learn", s.learn_step_one))
    for s, f, how, step in timed_as:
        c = step_cost(step, device)
        f.meta.update(asdict(c))
        costs.append((s.who, how, str(batch), f"{f.median:.1f}", *c.cells()))
    base = its[0]
    rows = [
        (s.who, str(batch), f"{i.median:.1f}", f"{u.median:.1f}", ratio(i, base).cell())
        for s, i, u in zip(sides, its, ups, strict=True)
    ]
    lines = []
    for i, s in enumerate(sides):
        if s.learn_step is not None:  # rlamd's rows; a peer's own row is followed by its twin
            continue
        for f in (base, its[i + 1]):
            r = ratio(f, its[i], f"ratio_to_{s.peer.name}")
            algo = "" if f is base else f", {s.peer.label}'s algorithm"
            lines.append(
                f"rlamd {f.meta['precision']}{algo} at batch {batch}: {r.median:.2f}x "
                f"{s.peer.label}'s iterations/s (rounds {r.low:.2f}-{r.high:.2f})"
            )
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
) -> list[Figure]:
    device, notes = torch.device(device), [] if notes is None else notes
    figures, rows, costs, lines = [], [], [], []
    for b in batches:
        sides = [
            rlamd_side(b, p, device, warm, iters) for p in distinct_precisions(precisions, device)
        ]
        for peer, side in each_peer(
            "dqn", peers, notes, lambda p, b=b: p.dqn_side(b, device, warm, iters)
        ):
            side.peer = peer
            sides += [side, rlamd_side(b, "fp32", device, warm, iters, peer=peer)]
        try:
            got = _batch(b, device, sides, repeats)
        finally:
            for s in sides:
                s.close()
        figures, rows, costs, lines = (
            x + y for x, y in zip((figures, rows, costs, lines), got, strict=True)
        )
    head = (
        f"dqn on {device}: Breakout, 1 env, one update per env step (median of {repeats} "
        f"interleaved rounds x {iters}; ratio = it/s / rlamd {precisions[0]}'s, median per round "
        "(min-max)). rlamd: prioritized 3-step double dueling DQN; a peer and rlamd with "
        "'PEER algorithm': the peer's DQN"
    )
    report(head, rows, ("framework", "batch", "iterations/s", "learner updates/s", "ratio"))
    unit = "kernels" if device.type == "cuda" else "ops"
    what = "GPU kernels" if device.type == "cuda" else "leaf ATen ops doing work"
    report(
        f"per learn step (sample + update + priorities) on {device}, torch.profiler; {unit}: "
        + what,
        costs,
        ("framework", "mode", "batch", "updates/s", unit, "launches", "host µs", "device µs"),
        lines,
    )
    return figures
