"""Learner throughput without envs, per precision, eager and (on GPUs) CUDA/HIP graph:
DQN updates/s on synthetic Atari batches (``agent.update_on``), the DQN learn step from a
prioritized replay (``agent.learn``: sample, update, target sync, priority write) at the
largest batch, and PPO minibatch updates/s, with what one learn step costs
(:func:`rlamd.bench.common.step_cost`). The variants of one figure are interleaved.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import partial
from typing import Any

import numpy as np
import torch

from .common import Contender, Figure, interleave, repeat, report, step_cost, timed

__all__ = ["filled_replay", "run_learner_suite"]

WARM = 5
"""Calls before timing: more than the capture's warm-up, so graphs are captured first."""


def filled_replay(
    device: torch.device,
    capacity: int = 8 * 1024,
    seed: int = 0,
    *,
    prioritized: bool = True,
    steps: int = 512,
    **options: Any,
):
    """An Atari-shaped replay (8 envs, uint8 4x84x84, 3-step) after ``steps`` vector steps,
    prioritized (alpha 0.5) or uniform; ``options`` go to the buffer (``backend`` ...)."""
    from rlamd.replay import PrioritizedReplayBuffer, ReplayBuffer

    if prioritized:
        options = {"alpha": 0.5, **options}
    kind = PrioritizedReplayBuffer if prioritized else ReplayBuffer
    buf = kind(
        capacity,
        8,
        (4, 84, 84),
        torch.uint8,
        frame_stack=4,
        num_actions=4,
        n_step=3,
        device=device,
        seed=seed,
        **options,
    )
    rng = np.random.default_rng(seed)
    z = np.zeros(8, dtype=bool)
    frames = rng.integers(0, 255, (16, 8, 4, 84, 84), dtype=np.uint8)
    for t in range(steps):
        done, obs = (np.arange(8) + t) % 97 == 0, frames[t % 16]
        buf.add(obs, rng.integers(0, 4, 8), rng.normal(size=8).astype(np.float32), z, done, obs)
    return buf


def _agent(kind: str, precision: str, mode: str | None, device: torch.device):
    """rlamd's DQN or PPO on Atari shapes, captured with graph ``mode`` (None: not at all)."""
    from rlamd.agents.dqn import DQN, DQNConfig
    from rlamd.agents.ppo import PPO, PPOConfig
    from rlamd.algos.dqn import capture_dqn
    from rlamd.algos.ppo import capture_ppo
    from rlamd.graphs import graphs_enabled
    from rlamd.precision import Precision

    p, graphs = Precision(precision, device), graphs_enabled(mode or "off", device)
    if kind == "ppo":
        cfg = PPOConfig(num_steps=32, num_minibatches=1, update_epochs=1)
        return capture_ppo(PPO(cfg, (4, 84, 84), 4, device, p, capturable=graphs), mode)
    if mode is None:
        return DQN(DQNConfig(), (4, 84, 84), 4, device, p)
    return capture_dqn(DQN(DQNConfig(), (4, 84, 84), 4, device, p, capturable=graphs), mode)


def _rows(label: str, built: list, device, iters: int, repeats: int, out: dict, cost: bool):
    """Interleave ``(name, meta, step)``; a table row per figure (and a step-cost row)."""
    contenders = [
        Contender(name, "updates/s", timed(repeat(step, iters), device=device), meta)
        for name, meta, step in built
    ]
    for f, (_, m, step) in zip(interleave(contenders, repeats=repeats), built, strict=True):
        cells = (m["precision"], str(m["batch"]), m.get("graph", "off"))
        out["rows"].append((label, *cells, f"{f.median:,.1f}"))
        out["figures"].append(f)
        if cost:
            c = step_cost(step, device)
            f.meta.update(asdict(c))
            out["costs"].append((label.split(" (")[0], *cells, *c.cells()))


def _warmed(step):
    repeat(step, WARM)()
    return step


def run_learner_suite(
    device: torch.device | str = "cpu",
    batches: tuple[int, ...] = (32, 128, 512),
    iters: int = 10,
    repeats: int = 3,
) -> list[Figure]:
    from rlamd.agents.ppo import PPORows
    from rlamd.device import describe_device
    from rlamd.replay import ReplayBatch

    device, g = torch.device(device), torch.Generator(device=device).manual_seed(0)
    gpu, out = device.type == "cuda", {"rows": [], "figures": [], "costs": []}
    # Without native bf16 a CPU emulates it (several times slower; `auto` never picks it).
    precisions = [
        "fp32",
        *(["bf16"] if describe_device(device).bf16 else []),
        *(["fp16"] if gpu else []),
    ]
    variants = [(p, m) for p in precisions for m in (("off", "on") if gpu else ("off",))]
    buf = filled_replay(device)
    frames = partial(torch.randint, 0, 255, dtype=torch.uint8, device=device, generator=g)
    ints = partial(torch.randint, 0, 4, device=device, generator=g)
    randn = partial(torch.randn, device=device, generator=g)
    run = partial(_rows, device=device, iters=iters, repeats=repeats, out=out)
    for b in batches:
        data = ReplayBatch(
            frames((b, 4, 84, 84)),
            ints((b,)),
            randn(b),
            frames((b, 4, 84, 84)),
            torch.full((b,), 0.97, device=device),
            torch.ones(b, device=device),
            torch.arange(b, device=device),
        )
        meta = {"batch": b, "device": str(device)}
        run(
            "DQN update",
            [
                (
                    f"learner/dqn/{p}/b{b}",
                    {"precision": p, **meta},
                    partial(_agent("dqn", p, None, device).update_on, data),
                )
                for p in precisions
            ],
            cost=False,
        )
        if b == max(batches):
            built = []
            for p, mode in variants:
                agent = _agent("dqn", p, mode, device)
                m = {
                    "precision": p,
                    "batch": b,
                    "graph": mode,
                    "captured": agent.learn_step.captured,
                }
                built.append(
                    (
                        f"learner/dqn_learn/{p}/b{b}/graph_{mode}",
                        m,
                        _warmed(partial(agent.learn, buf, b, 0.5)),
                    )
                )
            run("DQN learn step (replay)", built, cost=True)
    mb, z = 256, torch.zeros(256, device=device)  # PPO minibatch: 8 envs x 128 steps / 4
    rows = PPORows(frames((mb, 4, 84, 84)), ints((mb,)), z, z.clone(), randn(mb), z.clone())
    run(
        "PPO minibatch",
        [
            (
                f"learner/ppo/{p}/mb{mb}/graph_{mode}",
                {"precision": p, "batch": mb, "graph": mode},
                _warmed(partial(_agent("ppo", p, mode, device).learn, rows)),
            )
            for p, mode in variants
        ],
        cost=True,
    )
    report(
        f"learner on {device}: Nature CNN, Atari-shaped batches on the device (median of "
        f"{repeats} x {iters})",
        out["rows"],
        ("update", "precision", "batch", "graph", "updates/s"),
    )
    unit = "kernels" if gpu else "ops"
    head = (
        f"per learn step on {device} (torch.profiler; {unit}: "
        + ("GPU kernels run" if gpu else "leaf ATen ops doing work")
        + "; launches: host submissions; host µs: time to issue it)"
    )
    head_row = ("step", "precision", "batch", "graph", unit, "launches", "host µs", "device µs")
    report(head, out["costs"], head_row)
    return out["figures"]
