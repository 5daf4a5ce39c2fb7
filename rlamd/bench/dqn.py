"""DQN iterations/s on Breakout and pure learner updates/s, rlamd against SB3.

An *iteration* (the Atari iteration-speed table) is one update on a batch sampled from
prioritized replay plus the env steps collected for it: here one env, one update per env
step (train frequency 1). rlamd runs :class:`rlamd.loops.OffPolicyLoop`, the loop
``python -m rlamd.train`` runs; Stable-Baselines3's DQN runs with the same batch size,
train frequency, network (Nature CNN) and 1 env, in the same process and on the same
device, after both buffers hold the same number of warm-up transitions. Per learn step
the suite also prints kernels (GPU) or ops (CPU), host submissions, host µs and device
µs, for rlamd eager, rlamd's learn step (a captured graph on GPUs) and SB3.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from .common import Figure, StepCost, measure, print_table, step_cost
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


def _times(step: Callable[[], None], iters: int) -> Callable[[], int]:
    """``iters`` calls of ``step`` as one timed unit of work."""

    def run() -> int:
        for _ in range(iters):
            step()
        return iters

    return run


def _rlamd_figures(
    batch: int,
    precision: str,
    device: torch.device,
    warm: int,
    iters: int,
    repeats: int,
    algo: dict[str, Any] | None = None,
) -> tuple[Figure, Figure, Figure, list[tuple[str, str, Figure]]]:
    """rlamd's iterations/s, eager learner updates/s and learn-step updates/s (a graph on
    GPUs), with the step costs of the last two; ``algo`` overrides DQNConfig fields
    (:data:`SB3_ALGORITHM`: the like-for-like row)."""
    from rlamd.graphs import release_methods

    loop, agent = _rlamd_setup(batch, precision, device, warm, **(algo or {}))
    mode = agent.precision.mode + ("_sb3algo" if algo else "")

    def iterate() -> int:
        for _ in range(iters):
            loop.iterate()
        return iters

    def learn_step() -> None:  # the one learn step: a captured graph on GPUs
        loop.agent.learn(loop.buffer, batch, 0.4)

    meta: dict[str, Any] = {
        "repeats": repeats,
        "device": device,
        "batch": batch,
        "precision": agent.precision.mode,
        "algorithm": "sb3" if algo else "rlamd",
    }
    f_it = measure(f"dqn/rlamd_{mode}/b{batch}/iterations", "it/s", iterate, **meta)
    for _ in range(5):  # past the graph's warm-up and capture
        learn_step()
    graphed = agent.learn_step.captured
    f_gr = measure(
        f"dqn/rlamd_{mode}/b{batch}/learn_step",
        "updates/s",
        _times(learn_step, iters),
        **meta,
        graph=graphed,
    )
    f_gr.meta.update(step_cost(learn_step, device).to_dict())
    release_methods(agent, "the eager row")  # the same step, run eagerly
    f_up = measure(
        f"dqn/rlamd_{mode}/b{batch}/learner", "updates/s", _times(learn_step, iters), **meta
    )
    f_up.meta.update(step_cost(learn_step, device).to_dict())
    who = f"rlamd ({agent.precision.mode}{', SB3 algorithm' if algo else ''})"
    costs = [(who, "eager", f_up), (who, "graph" if graphed else "eager", f_gr)]
    loop.collector.close()
    return f_it, f_up, f_gr, costs


def _sb3_figures(
    batch: int, device: torch.device, warm: int, iters: int, repeats: int
) -> tuple[Figure, Figure]:
    """SB3's iterations/s and learner updates/s (with its step cost); raises
    :class:`PeerUnavailable` when SB3 cannot run."""
    model = _sb3_setup(batch, warm, device)

    def sb3_iterate() -> int:
        model.learn(total_timesteps=iters, reset_num_timesteps=False)
        return iters

    def sb3_learn() -> int:
        model.train(gradient_steps=iters, batch_size=batch)
        return iters

    meta: dict[str, Any] = {"repeats": repeats, "batch": batch, "device": device}
    f_it = measure(f"dqn/sb3_fp32/b{batch}/iterations", "it/s", sb3_iterate, **meta)
    f_up = measure(f"dqn/sb3_fp32/b{batch}/learner", "updates/s", sb3_learn, **meta)
    f_up.meta.update(
        step_cost(lambda: model.train(gradient_steps=1, batch_size=batch), device).to_dict()
    )
    model.env.close()
    return f_it, f_up


def _row(who: str, batch: int, f_it: Figure, f_up: Figure, base: Figure) -> tuple[str, ...]:
    return (
        who,
        str(batch),
        f"{f_it.median:.1f}",
        f"{f_up.median:.1f}",
        f"{f_it.median / base.median:.2f}",
    )


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
    rows = []
    costs: list[tuple[str, str, Figure]] = []
    for batch in batches:
        base: Figure | None = None
        for precision in precisions:
            f_it, f_up, f_gr, cost = _rlamd_figures(batch, precision, device, warm, iters, repeats)
            costs += cost
            figures += [f_it, f_up, f_gr]
            base = base or f_it
            rows.append(_row(f"rlamd ({f_it.meta['precision']})", batch, f_it, f_up, base))
        if not peers:
            continue
        try:
            f_it, f_up = _sb3_figures(batch, device, warm, iters, repeats)
        except PeerUnavailable as exc:
            notes.append(f"Stable-Baselines3 skipped: {exc}")
            continue
        costs.append(("SB3 DQN (fp32)", "eager", f_up))
        figures += [f_it, f_up]
        assert base is not None
        base.meta["ratio_to_sb3"] = base.median / f_it.median
        rows.append(_row("SB3 DQN (fp32)", batch, f_it, f_up, base))
        # The same algorithm as SB3's: what the framework itself costs.
        m_it, m_up, m_gr, cost = _rlamd_figures(
            batch, "fp32", device, warm, iters, repeats, algo=SB3_ALGORITHM
        )
        costs += cost
        figures += [m_it, m_up, m_gr]
        m_it.meta["ratio_to_sb3"] = m_it.median / f_it.median
        rows.append(_row("rlamd (fp32, SB3's algorithm)", batch, m_it, m_up, base))
    print(
        f"\ndqn on {device}: Breakout, 1 env, one update per env step (median of {repeats} x "
        f"{iters}; ratio = it/s / rlamd {precisions[0]}'s). rlamd: prioritized 3-step double "
        "dueling DQN; SB3 and rlamd 'SB3's algorithm': uniform 1-step DQN"
    )
    print_table(rows, ("framework", "batch", "iterations/s", "learner updates/s", "ratio"))
    if costs:
        _print_costs(device, costs)
    for f in figures:
        if "ratio_to_sb3" in f.meta:
            algo = ", SB3's algorithm" if f.meta["algorithm"] == "sb3" else ""
            print(
                f"rlamd {f.meta['precision']}{algo} at batch {f.meta['batch']}: "
                f"{f.meta['ratio_to_sb3']:.2f}x SB3's iterations/s"
            )
    return figures
