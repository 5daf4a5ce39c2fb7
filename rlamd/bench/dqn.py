"""DQN iterations/s on Breakout and pure learner updates/s, rlamd against SB3.

An *iteration* (the Atari iteration-speed table) is one update on a batch sampled from
prioritized replay plus the env steps collected for it: here one env, one update per env
step (train frequency 1). rlamd runs :class:`rlamd.loops.OffPolicyLoop`, the loop
``python -m rlamd.train`` runs; Stable-Baselines3's DQN runs with the same batch size,
train frequency, network (Nature CNN) and 1 env, in the same process and on the same
device, after both buffers hold the same number of warm-up transitions. Per learn step
the suite also prints kernels (GPU) or ops (CPU), host submissions, host µs and device
µs, for rlamd eager, rlamd's learn step (a captured graph on GPUs) and SB3. Every
contender is built and filled first; each figure is then timed in interleaved rounds
(rlamd, SB3, rlamd like-for-like, rlamd, ...), and ratios are taken per round.
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
    interleave,
    note_ratio,
    print_table,
    ratio,
    step_cost,
    timed,
)
from .peers import PeerUnavailable, sb3_atari

__all__ = ["run_dqn_suite"]

GAME = "breakout"
GYM_ID = "BreakoutNoFrameskip-v4"
SB3_ALGORITHM = {"double_q": False, "dueling": False, "prioritized": False, "n_step": 1}
"""SB3's DQN, for a like-for-like row: one-step targets, no double Q (rlamd's default costs
a third forward pass per update), no dueling head, uniform replay."""


def _rlamd_setup(batch: int, precision: str, device: torch.device, warm: int, **algo: Any):
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
    train = TrainConfig(
        env=GAME, num_envs=1, precision=precision, device=str(device), steps=10_000_000
    )
    env = make_env(GAME, num_envs=1)
    agent = build_agent(RunConfig(train=train, dqn=cfg), device, env)
    buf = build_replay(cfg, env, device, seed=0)
    loop = OffPolicyLoop(Collector(env, device, seed=0), buf, agent, cfg, train.steps)
    while loop.step < warm:
        loop.iterate()
    return loop, agent


def _sb3_setup(batch: int, warm: int, device: torch.device):
    model = sb3_atari("dqn", 1, str(device), batch=batch, warm=warm)
    model.learn(total_timesteps=warm)
    return model


@dataclass
class _Side:
    """One contender, built and filled: what each of its figures runs (``iters`` units)."""

    who: str
    """Row label."""
    key: str
    """Figure-name part: ``rlamd_bf16``, ``sb3_fp32``, ``rlamd_fp32_sb3algo``."""
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


def _times(step: Callable[[], object], iters: int) -> Callable[[], int]:
    """``iters`` calls of ``step`` as one timed unit of work."""

    def run() -> int:
        for _ in range(iters):
            step()
        return iters

    return run


def _rlamd_side(
    batch: int,
    precision: str,
    device: torch.device,
    warm: int,
    iters: int,
    algo: dict[str, Any] | None = None,
) -> _Side:
    """rlamd's loop after ``warm`` steps; ``algo`` overrides DQNConfig fields
    (:data:`SB3_ALGORITHM`: the like-for-like row). The learn step is timed twice: as the
    run captures it (a graph on GPUs) and run eagerly (the same function)."""
    from rlamd.graphs import Captured

    loop, agent = _rlamd_setup(batch, precision, device, warm, **(algo or {}))
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
    meta: dict[str, Any] = {
        "device": str(device),
        "batch": batch,
        "precision": mode,
        "algorithm": "sb3" if algo else "rlamd",
    }
    return _Side(
        who=f"rlamd ({mode}{', SB3 algorithm' if algo else ''})",
        key=f"rlamd_{mode}" + ("_sb3algo" if algo else ""),
        meta=meta,
        iterate=_times(loop.iterate, iters),
        learn=_times(eager_step, iters),
        learn_one=eager_step,
        close=loop.collector.close,
        learn_step=_times(graph_step, iters),
        learn_step_one=graph_step,
        graphed=captured.captured,
    )


def _sb3_side(batch: int, device: torch.device, warm: int, iters: int) -> _Side:
    """SB3's DQN after ``warm`` steps; raises :class:`PeerUnavailable` when SB3 cannot run."""
    model = _sb3_setup(batch, warm, device)

    def iterate() -> int:
        model.learn(total_timesteps=iters, reset_num_timesteps=False)
        return iters

    def learn() -> int:
        model.train(gradient_steps=iters, batch_size=batch)
        return iters

    return _Side(
        who="SB3 DQN (fp32)",
        key="sb3_fp32",
        meta={"batch": batch, "device": str(device), "precision": "fp32", "algorithm": "sb3"},
        iterate=iterate,
        learn=learn,
        learn_one=lambda: model.train(gradient_steps=1, batch_size=batch),
        close=model.env.close,
    )


def _interleaved(
    sides: list[_Side], what: str, unit: str, batch: int, device: torch.device, repeats: int
) -> list[Figure]:
    """One figure per side (``what``: iterate, learn or learn_step), timed in rounds."""
    suffix = {"iterate": "iterations", "learn": "learner", "learn_step": "learn_step"}[what]
    contenders = []
    for s in sides:
        fn = getattr(s, what)
        meta = {**s.meta, **({"graph": s.graphed} if what == "learn_step" else {})}
        contenders.append(
            Contender(f"dqn/{s.key}/b{batch}/{suffix}", unit, timed(fn, device=device), meta)
        )
    return interleave(contenders, repeats=repeats)


def _row(who: str, batch: int, f_it: Figure, f_up: Figure, base: Figure) -> tuple[str, ...]:
    return (who, str(batch), f"{f_it.median:.1f}", f"{f_up.median:.1f}", ratio(f_it, base).cell())


def _cost_cells(f: Figure) -> tuple[str, ...]:
    keys = ("kernels", "launches", "host_us", "device_us")
    return StepCost(**{k: f.meta.get(k) for k in keys}).cells()


def _print_costs(device: torch.device, costs: list[tuple[str, str, Figure]]) -> None:
    """The per-learn-step cost table (kernels or ops, launches, host and device µs)."""
    unit = "kernels" if device.type == "cuda" else "ops"
    print(
        f"\nper learn step (sample + update + priorities) on {device}, torch.profiler; {unit}: "
        + ("GPU kernels" if device.type == "cuda" else "leaf ATen ops doing work")
    )
    print_table(
        [
            (who, how, str(f.meta["batch"]), f"{f.median:.1f}", *_cost_cells(f))
            for who, how, f in costs
        ],
        ("framework", "mode", "batch", "updates/s", unit, "launches", "host µs", "device µs"),
    )


def _sides(
    batch: int,
    device: torch.device,
    precisions: tuple[str, ...],
    warm: int,
    iters: int,
    peers: bool,
    notes: list[str],
) -> list[_Side]:
    """rlamd per precision, then (when SB3 runs) SB3 and rlamd running SB3's algorithm."""
    modes = distinct_precisions(precisions, device)
    sides = [_rlamd_side(batch, p, device, warm, iters) for p in modes]
    if not peers:
        return sides
    try:
        sides.append(_sb3_side(batch, device, warm, iters))
    except PeerUnavailable as exc:
        notes.append(f"Stable-Baselines3 skipped: {exc}")
        return sides
    # The same algorithm as SB3's: what the framework itself costs.
    sides.append(_rlamd_side(batch, "fp32", device, warm, iters, algo=SB3_ALGORITHM))
    return sides


def _batch_figures(
    batch: int, device: torch.device, sides: list[_Side], repeats: int
) -> tuple[list[Figure], list[tuple[str, ...]], list[tuple[str, str, Figure]]]:
    """Interleaved figures for one batch size: (figures, table rows, step-cost rows)."""
    its = _interleaved(sides, "iterate", "it/s", batch, device, repeats)
    ups = _interleaved(sides, "learn", "updates/s", batch, device, repeats)
    own = [s for s in sides if s.learn_step is not None]
    grs = _interleaved(own, "learn_step", "updates/s", batch, device, repeats)
    costs: list[tuple[str, str, Figure]] = []
    for s, f_up in zip(sides, ups, strict=True):
        f_up.meta.update(step_cost(s.learn_one, device).to_dict())
        costs.append((s.who, "eager", f_up))
    for s, f_gr in zip(own, grs, strict=True):
        assert s.learn_step_one is not None
        f_gr.meta.update(step_cost(s.learn_step_one, device).to_dict())
        costs.append((s.who, "graph" if s.graphed else "eager, agent.learn", f_gr))
    base = its[0]
    rows = [_row(s.who, batch, i, u, base) for s, i, u in zip(sides, its, ups, strict=True)]
    keys = [s.key for s in sides]
    if "sb3_fp32" in keys:
        sb3 = its[keys.index("sb3_fp32")]
        note_ratio(base, "ratio_to_sb3", ratio(base, sb3))
        note_ratio(its[-1], "ratio_to_sb3", ratio(its[-1], sb3))
    return [*its, *ups, *grs], rows, costs


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
    device = torch.device(device)
    figures: list[Figure] = []
    notes = [] if notes is None else notes
    rows: list[tuple[str, ...]] = []
    costs: list[tuple[str, str, Figure]] = []
    for batch in batches:
        sides = _sides(batch, device, precisions, warm, iters, peers, notes)
        try:
            got, got_rows, got_costs = _batch_figures(batch, device, sides, repeats)
        finally:
            for s in sides:
                s.close()
        figures += got
        rows += got_rows
        costs += got_costs
    print(
        f"\ndqn on {device}: Breakout, 1 env, one update per env step (median of {repeats} "
        f"interleaved rounds x {iters}; ratio = it/s / rlamd {precisions[0]}'s, median per "
        "round (min-max)). rlamd: prioritized 3-step double dueling DQN; SB3 and rlamd "
        "'SB3's algorithm': uniform 1-step DQN"
    )
    print_table(rows, ("framework", "batch", "iterations/s", "learner updates/s", "ratio"))
    if costs:
        _print_costs(device, costs)
    for f in figures:
        if "ratio_to_sb3" in f.meta:
            algo = ", SB3's algorithm" if f.meta["algorithm"] == "sb3" else ""
            lo, hi = f.meta["ratio_to_sb3_range"]
            print(
                f"rlamd {f.meta['precision']}{algo} at batch {f.meta['batch']}: "
                f"{f.meta['ratio_to_sb3']:.2f}x SB3's iterations/s (rounds {lo:.2f}-{hi:.2f})"
            )
    return figures
