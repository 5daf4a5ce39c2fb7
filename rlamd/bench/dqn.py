"""DQN iterations/s on Breakout and learner updates/s: rlamd and every peer in ``dqn``.

An *iteration* (the Atari iteration-speed table) is one update on a batch sampled from
prioritized replay plus the env steps collected for it: here one env, one update per env
step. rlamd runs :class:`rlamd.loops.OffPolicyLoop`, the loop ``python -m rlamd.train``
runs; each peer runs its DQN with the same batch, train frequency, network (Nature CNN)
and 1 env, in this process on the same device, after both buffers hold the same warm-up
transitions. A like-for-like row per peer runs rlamd with the peer's algorithm (its
``dqn_algorithm``). Per learn step the suite also prints kernels (GPU) or ops (CPU), host
submissions, host µs and device µs. Every contender is built and filled first; each
figure is then timed in interleaved rounds, and ratios are taken per round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from .common import (
    Contender,
    Figure,
    StepCost,
    distinct_precisions,
    each_peer,
    interleave,
    note_ratio,
    print_table,
    ratio,
    step_cost,
    timed,
)

__all__ = ["Side", "run_dqn_suite"]

GAME = "breakout"


@dataclass
class Side:
    """One contender, built and filled: what each of its figures runs (``iters`` units)."""

    who: str
    """Row label."""
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


def _times(step: Callable[[], object], iters: int) -> Callable[[], int]:
    def run() -> int:
        for _ in range(iters):
            step()
        return iters

    return run


def _loop(batch: int, precision: str, device: torch.device, warm: int, **algo: Any):
    from rlamd.agents.dqn import DQNConfig
    from rlamd.algos import build_agent
    from rlamd.algos.dqn_replay import build_replay
    from rlamd.collector import Collector
    from rlamd.config.sections import RunConfig, TrainConfig
    from rlamd.envs import make_env
    from rlamd.loops import OffPolicyLoop

    cfg = replace(DQNConfig(), batch_size=batch, train_frequency=1, learning_starts=warm,
                  buffer_size=50_000, **algo)  # fmt: skip
    train = TrainConfig(env=GAME, num_envs=1, precision=precision, device=str(device), steps=10**7)
    env = make_env(GAME, num_envs=1)
    agent = build_agent(RunConfig(train=train, dqn=cfg), device, env)
    buf = build_replay(cfg, env, device, seed=0)
    loop = OffPolicyLoop(Collector(env, device, seed=0), buf, agent, cfg, train.steps)
    while loop.step < warm:
        loop.iterate()
    return loop, agent


def rlamd_side(batch: int, precision: str, device: torch.device, warm: int, iters: int,
               peer: Any = None) -> Side:  # fmt: skip
    """rlamd's loop after ``warm`` steps, with ``peer``'s algorithm when given (the
    like-for-like row). The learn step is timed as the run captures it (a graph on GPUs)
    and eagerly (the same function)."""
    from rlamd.graphs import Captured

    loop, agent = _loop(batch, precision, device, warm, **(peer.dqn_algorithm() if peer else {}))
    mode = agent.precision.mode
    captured = agent.learn_step
    eager = Captured(captured.fn, device, mode="off", name="dqn learn_step (eager)")

    def eager_step() -> None:  # the same learn step, never captured
        agent.learn_step = eager
        try:
            loop.agent.learn(loop.buffer, batch, 0.4)
        finally:
            agent.learn_step = captured

    def graph_step() -> None:  # as the run calls it: a graph on GPUs
        loop.agent.learn(loop.buffer, batch, 0.4)

    for _ in range(5):  # past the graph's warm-up and capture
        graph_step()
    algo = peer.name if peer else "rlamd"
    meta = {"device": str(device), "batch": batch, "precision": mode, "algorithm": algo}
    who = f"rlamd ({mode}{f', {peer.label} algorithm' if peer else ''})"
    return Side(who, f"rlamd_{mode}" + (f"_{peer.name}algo" if peer else ""), meta,
                _times(loop.iterate, iters), _times(eager_step, iters), eager_step,
                loop.collector.close, _times(graph_step, iters), graph_step, captured.captured, peer)  # fmt: skip


def _interleaved(sides: list[Side], what: str, unit: str, batch: int, device, repeats: int):
    suffix = {"iterate": "iterations", "learn": "learner", "learn_step": "learn_step"}[what]
    contenders = [
        Contender(f"dqn/{s.key}/b{batch}/{suffix}", unit, timed(getattr(s, what), device=device),
                  {**s.meta, **({"graph": s.graphed} if what == "learn_step" else {})})
        for s in sides
    ]  # fmt: skip
    return interleave(contenders, repeats=repeats)


def _batch(batch: int, device: torch.device, sides: list[Side], repeats: int):
    """Interleaved figures for one batch size: (figures, table rows, step-cost rows, lines)."""
    its = _interleaved(sides, "iterate", "it/s", batch, device, repeats)
    ups = _interleaved(sides, "learn", "updates/s", batch, device, repeats)
    own = [s for s in sides if s.learn_step is not None]
    grs = _interleaved(own, "learn_step", "updates/s", batch, device, repeats)
    costs = []
    for s, f in [*zip(sides, ups, strict=True), *zip(own, grs, strict=True)]:
        fn = s.learn_one if f in ups else s.learn_step_one
        f.meta.update(step_cost(fn, device).to_dict())
        how = "eager" if f in ups else ("graph" if s.graphed else "eager, agent.learn")
        costs.append((s.who, how, f))
    base = its[0]
    rows = [(s.who, str(batch), f"{i.median:.1f}", f"{u.median:.1f}", ratio(i, base).cell())
            for s, i, u in zip(sides, its, ups, strict=True)]  # fmt: skip
    lines = []
    for i, s in enumerate(sides):
        if s.learn_step is not None:  # rlamd's rows; a peer's own row is followed by its twin
            continue
        for f in (base, its[i + 1]):
            r = ratio(f, its[i])
            note_ratio(f, f"ratio_to_{s.peer.name}", r)
            algo = "" if f is base else f", {s.peer.label}'s algorithm"
            lines.append(f"rlamd {f.meta['precision']}{algo} at batch {batch}: {r.median:.2f}x "
                         f"{s.peer.label}'s iterations/s (rounds {r.low:.2f}-{r.high:.2f})")  # fmt: skip
    return [*its, *ups, *grs], rows, costs, lines


def _sides(batch, device, precisions, warm, iters, peers, notes) -> list[Side]:
    """rlamd per precision, then each peer and rlamd running that peer's algorithm."""
    sides = [
        rlamd_side(batch, p, device, warm, iters) for p in distinct_precisions(precisions, device)
    ]
    for peer, side in each_peer(
        "dqn", peers, notes, lambda p: p.dqn_side(batch, device, warm, iters)
    ):
        side.peer = peer
        sides += [side, rlamd_side(batch, "fp32", device, warm, iters, peer=peer)]
    return sides


def _print_costs(device: torch.device, costs: list) -> None:
    unit = "kernels" if device.type == "cuda" else "ops"
    print(f"\nper learn step (sample + update + priorities) on {device}, torch.profiler; {unit}: "
          + ("GPU kernels" if device.type == "cuda" else "leaf ATen ops doing work"))  # fmt: skip
    keys = ("launches", "kernels", "host_us", "device_us")
    print_table(
        [(who, how, str(f.meta["batch"]), f"{f.median:.1f}",
          *StepCost(**{k: f.meta.get(k) for k in keys}).cells()) for who, how, f in costs],
        ("framework", "mode", "batch", "updates/s", unit, "launches", "host µs", "device µs"),
    )  # fmt: skip


def run_dqn_suite(batches: tuple[int, ...] = (32, 128), iters: int = 60, repeats: int = 3,
                  device: torch.device | str = "cpu", precisions: tuple[str, ...] = ("auto", "fp32"),
                  warm: int = 1_000, peers: bool = True, notes: list[str] | None = None) -> list[Figure]:  # fmt: skip
    device, notes = torch.device(device), [] if notes is None else notes
    figures, rows, costs, lines = [], [], [], []
    for batch in batches:
        sides = _sides(batch, device, precisions, warm, iters, peers, notes)
        try:
            got = _batch(batch, device, sides, repeats)
        finally:
            for s in sides:
                s.close()
        figures, rows, costs, lines = (
            figures + got[0],
            rows + got[1],
            costs + got[2],
            lines + got[3],
        )
    print(f"\ndqn on {device}: Breakout, 1 env, one update per env step (median of {repeats} "
          f"interleaved rounds x {iters}; ratio = it/s / rlamd {precisions[0]}'s, median per round "
          "(min-max)). rlamd: prioritized 3-step double dueling DQN; a peer and rlamd with "
          "'PEER algorithm': the peer's DQN")  # fmt: skip
    print_table(rows, ("framework", "batch", "iterations/s", "learner updates/s", "ratio"))
    _print_costs(device, costs)
    for line in lines:
        print(line)
    return figures
