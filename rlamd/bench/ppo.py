"""PPO env steps/s, learning included: rlamd (``LocalEngine``, as ``rlamd.train`` runs it)
and each peer in ``ppo``, all with one :class:`PPOSettings`. ``ppo``: Breakout, 8 envs x 128
steps, 4 x 4 minibatches, lr 2.5e-4, clip 0.1, entropy 0.01 (CleanRL ppo_atari), beside the
raw env's random play; ``classic``: CartPole-v1 alike, lr 1e-3, clip 0.2, no entropy."""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

from rlamd.config.layers import resolve
from rlamd.engine import LocalEngine

from . import common as c
from .device import raw_env, stepping
from .peer import PPOSettings

__all__ = ["atari_settings", "classic_settings", "run_classic_suite", "run_ppo_suite"]

UNIT = "env steps/s"


def atari_settings(num_envs: int = 8) -> PPOSettings:
    return PPOSettings("atari", "BreakoutNoFrameskip-v4", num_envs, 128, 4, 4, 2.5e-4, 0.1, 0.01)


def classic_settings(num_envs: int = 8) -> PPOSettings:
    return PPOSettings("classic", "CartPole-v1", num_envs, 128, 4, 4, 1e-3, 0.2, 0.0)


def _rlamd(s: PPOSettings, precision: str, device: torch.device, iters: int, suite: str):
    env = "breakout" if s.family == "atari" else "cartpole"
    train = {"env": env, "algo": "ppo", "num_envs": s.num_envs, "device": str(device)}
    train |= {"precision": precision, "steps": 10**9}
    sets = {"num_steps": s.num_steps, "num_minibatches": s.minibatches, "lr": s.lr}
    sets |= {"update_epochs": s.epochs, "clip_coef": s.clip, "ent_coef": s.ent_coef}
    cfg = resolve({"train": train}, sets=[f"ppo.{k}={v}" for k, v in sets.items()])
    engine = LocalEngine(cfg, 0, None, log=lambda _line: None)
    mode = engine.agent.precision.mode
    run = c.timed(c.repeat(engine.iterate, iters, iters * s.per_rollout), device=device)
    meta = {"device": str(device), "num_envs": s.num_envs, "precision": mode}
    contender = c.Contender(f"{suite}/rlamd_{mode}/{s.num_envs}envs", UNIT, run, meta)
    return f"rlamd ({mode})", contender, engine.close, None


def _suite(suite: str, s: PPOSettings, device, iters, repeats, precisions, peers, notes):
    built = []
    try:
        for p in c.distinct_precisions(precisions, device):
            built.append(_rlamd(s, p, device, iters, suite))
        for p, t in c.each_peer("ppo", peers, notes, lambda p: p.ppo(s, device, iters)):
            run = c.timed(t.run, device=device, per=t.per)
            name = f"{suite}/{p.name}_fp32/{s.num_envs}envs"
            built.append((t.label, c.Contender(name, UNIT, run, t.meta), t.close, p))
        if s.family == "atari":  # the raw vector env, random actions: no learner can pass it
            raw, n = raw_env("breakout", s.num_envs), s.num_envs
            raw.reset(seed=0)
            rng = np.random.default_rng(0)  # one generator: 256 different action vectors
            acts = [rng.integers(0, 4, n) for _ in range(256)]
            run, meta = c.timed(stepping(raw, acts, len(acts) * n)), {"num_envs": n}
            ceiling = c.Contender(f"ppo/raw_env_ceiling/{n}envs", UNIT, run, meta)
            built.append(("raw AtariVectorEnv (no learning)", ceiling, raw.close, None))
        figures = c.interleave([b[1] for b in built], repeats=repeats)
    finally:
        for _, _, close, _ in built:
            close()
    base = figures[0]
    rows = [
        (b[0], str(s.num_envs), f"{f.median:,.0f}", c.ratio(f, base).text(""))
        for b, f in zip(built, figures, strict=True)
    ]
    pairs = [(b[3], f) for b, f in zip(built, figures, strict=True) if b[3] is not None]
    head = f"rlamd {base.meta['precision']} with {s.num_envs} envs: "
    return figures, rows, c.peer_lines(base, pairs, UNIT, head)


def run_ppo_suite(
    iters: int = 3,
    repeats: int = 3,
    device: torch.device | str = "cpu",
    env_counts: tuple[int, ...] = (8,),
    precisions: tuple[str, ...] = ("auto", "fp32"),
    peers: bool = True,
    notes: list[str] | None = None,
    suite: str = "ppo",
) -> list[c.Figure]:
    """The ``ppo`` suite (Breakout) per env count, or ``classic`` (CartPole, 8 envs)."""
    device, notes = torch.device(device), [] if notes is None else notes
    figures, rows, lines = [], [], []
    for n in env_counts:
        s = atari_settings(n) if suite == "ppo" else classic_settings(n)
        got = _suite(suite, s, device, iters, repeats, precisions, peers, notes)
        figures, rows, lines = figures + got[0], rows + got[1], lines + got[2]
    what = "Breakout" if suite == "ppo" else "PPO on CartPole-v1"
    head = (
        f"{suite} on {device}: {what}, {s.num_steps} steps x envs per rollout, 4 epochs x 4 "
        f"minibatches, learning included (median of {repeats} interleaved rounds x {iters} "
        f"rollouts; ratio = steps/s / rlamd {precisions[0]}'s, median per round (min-max))"
    )
    c.report(head, rows, ("framework", "envs", UNIT, "ratio"), lines)
    return figures


run_classic_suite = partial(
    run_ppo_suite, iters=4, repeats=5, precisions=("auto",), suite="classic"
)
"""PPO on CartPole-v1 with 8 envs: rlamd and the peers, interleaved."""
