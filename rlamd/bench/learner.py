"""Learner throughput without envs, per precision, eager and (on GPUs) CUDA/HIP graph:
DQN updates/s on synthetic Atari batches on the device (``agent.update_on``); the DQN
learn step from a prioritized replay (``agent.learn``: sample, update, target sync,
priority write) at the largest batch; PPO minibatch updates/s. Also what one learn step
costs (:func:`rlamd.bench.common.step_cost`). The variants of one figure (precisions,
graph on and off) are timed in interleaved rounds.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch

from .common import Contender, Figure, interleave, print_table, step_cost, timed

__all__ = ["filled_replay", "run_learner_suite"]


def filled_replay(device: torch.device, capacity: int = 8 * 1024, seed: int = 0, *,
                  prioritized: bool = True, steps: int = 512, **options: Any):  # fmt: skip
    """An Atari-shaped replay (8 envs, uint8 4x84x84, 3-step) after ``steps`` vector steps
    (4K records by default), prioritized (alpha 0.5) or uniform; ``options`` go to the
    buffer (``backend``, ``validate``, ...)."""
    from rlamd.replay import PrioritizedReplayBuffer, ReplayBuffer

    if prioritized:
        options = {"alpha": 0.5, **options}
    kind = PrioritizedReplayBuffer if prioritized else ReplayBuffer
    buf = kind(capacity, 8, (4, 84, 84), torch.uint8, frame_stack=4, num_actions=4, n_step=3,
               device=device, seed=seed, **options)  # fmt: skip
    rng = np.random.default_rng(seed)
    z = np.zeros(8, dtype=bool)
    frames = rng.integers(0, 255, (16, 8, 4, 84, 84), dtype=np.uint8)
    for t in range(steps):
        done, obs = (np.arange(8) + t) % 97 == 0, frames[t % 16]
        buf.add(obs, rng.integers(0, 4, 8), rng.normal(size=8).astype(np.float32), z, done, obs)
    return buf


def _frames(n: int, device, g) -> torch.Tensor:
    return torch.randint(0, 255, (n, 4, 84, 84), dtype=torch.uint8, device=device, generator=g)


def _repeat(fn, iters: int):
    def run() -> int:
        for _ in range(iters):
            fn()
        return iters

    return run


class _Bench:
    """One suite run: its settings and the figures, table rows and step costs it collects."""

    warm = 5
    """Calls before timing: more than the capture's warm-up, so graphs are captured first."""

    def __init__(self, device: torch.device, iters: int, repeats: int) -> None:
        self.device, self.iters, self.repeats = device, iters, repeats
        self.g = torch.Generator(device=device).manual_seed(0)
        self.figures: list[Figure] = []
        self.rows: list[tuple[str, ...]] = []
        self.costs: list[tuple[str, ...]] = []

    def timed_rows(self, label: str, built: list, cost: bool) -> None:
        """Interleave ``(name, meta, step)`` contenders; a row per figure (and its cost)."""
        contenders = [Contender(name, "updates/s", timed(_repeat(step, self.iters), device=self.device), meta)
                      for name, meta, step in built]  # fmt: skip
        for f, (_, m, step) in zip(
            interleave(contenders, repeats=self.repeats), built, strict=True
        ):
            graph = m.get("graph", "off")
            self.rows.append((label, m["precision"], str(m["batch"]), graph, f"{f.median:,.1f}"))
            self.figures.append(f)
            if cost:
                c = step_cost(step, self.device)
                f.meta.update(c.to_dict())
                self.costs.append(
                    (label.split(" (")[0], m["precision"], str(m["batch"]), graph, *c.cells())
                )

    def agent(self, kind: str, precision: str, mode: str | None):
        from rlamd.graphs import graphs_enabled
        from rlamd.precision import Precision

        p = Precision(precision, self.device)
        if kind == "dqn":
            from rlamd.agents.dqn import DQN, DQNConfig
            from rlamd.algos.dqn import capture_dqn

            if mode is None:
                return DQN(DQNConfig(), (4, 84, 84), 4, self.device, p)
            agent = DQN(
                DQNConfig(),
                (4, 84, 84),
                4,
                self.device,
                p,
                capturable=graphs_enabled(mode, self.device),
            )
            return capture_dqn(agent, mode)
        from rlamd.agents.ppo import PPO, PPOConfig
        from rlamd.algos.ppo import capture_ppo

        cfg = PPOConfig(num_steps=32, num_minibatches=1, update_epochs=1)
        agent = PPO(
            cfg, (4, 84, 84), 4, self.device, p, capturable=graphs_enabled(mode, self.device)
        )
        return capture_ppo(agent, mode)

    def warmed(self, step):
        for _ in range(self.warm):
            step()
        return step

    def report(self) -> None:
        d = self.device
        print(f"\nlearner on {d}: Nature CNN, Atari-shaped batches on the device "
              f"(median of {self.repeats} x {self.iters})")  # fmt: skip
        print_table(self.rows, ("update", "precision", "batch", "graph", "updates/s"))
        if self.costs:
            unit = "kernels" if d.type == "cuda" else "ops"
            print(f"\nper learn step on {d} (torch.profiler; {unit}: "
                  + ("GPU kernels run" if d.type == "cuda" else "leaf ATen ops doing work")
                  + "; launches: host submissions; host µs: time to issue it)")  # fmt: skip
            head = ("step", "precision", "batch", "graph", unit, "launches", "host µs", "device µs")
            print_table(self.costs, head)


def run_learner_suite(device: torch.device | str = "cpu", batches: tuple[int, ...] = (32, 128, 512),
                      iters: int = 10, repeats: int = 3, ppo: bool = True,
                      replay: bool = True) -> list[Figure]:  # fmt: skip
    from rlamd.agents.ppo import PPORows
    from rlamd.device import describe_device
    from rlamd.replay import ReplayBatch

    device = torch.device(device)
    b = _Bench(device, iters, repeats)
    gpu, bf16 = device.type == "cuda", describe_device(device).bf16
    # Without native bf16 a CPU emulates it (several times slower; `auto` never picks it).
    precisions = ["fp32", *(["bf16"] if bf16 else []), *(["fp16"] if gpu else [])]
    variants = [(p, m) for p in precisions for m in (("off", "on") if gpu else ("off",))]
    buf = filled_replay(device) if replay else None
    g, n = b.g, torch.ones
    for batch in batches:
        data = ReplayBatch(_frames(batch, device, g), torch.randint(0, 4, (batch,), device=device, generator=g),
                           torch.randn(batch, device=device, generator=g), _frames(batch, device, g),
                           torch.full((batch,), 0.97, device=device), n(batch, device=device),
                           torch.arange(batch, device=device))  # fmt: skip
        b.timed_rows("DQN update", [
            (f"learner/dqn/{p}/b{batch}", {"precision": p, "batch": batch, "device": str(device)},
             partial(b.agent("dqn", p, None).update_on, data)) for p in precisions], cost=False)  # fmt: skip
        if buf is not None and batch == max(batches):
            built = []
            for p, mode in variants:
                agent = b.agent("dqn", p, mode)
                step = b.warmed(partial(agent.learn, buf, batch, 0.5))
                meta = {
                    "precision": p,
                    "batch": batch,
                    "graph": mode,
                    "captured": agent.learn_step.captured,
                }
                built.append((f"learner/dqn_learn/{p}/b{batch}/graph_{mode}", meta, step))
            b.timed_rows("DQN learn step (replay)", built, cost=True)
    if ppo:
        mb = 256  # PPO minibatch: 8 envs x 128 steps / 4
        z = [torch.zeros(mb, device=device) for _ in range(3)]
        rows = PPORows(_frames(mb, device, g), torch.randint(0, 4, (mb,), device=device, generator=g), z[0], z[1],
                       torch.randn(mb, device=device, generator=g), z[2])  # fmt: skip
        b.timed_rows("PPO minibatch", [
            (f"learner/ppo/{p}/mb{mb}/graph_{mode}", {"precision": p, "batch": mb, "graph": mode},
             b.warmed(partial(b.agent("ppo", p, mode).learn, rows))) for p, mode in variants], cost=True)  # fmt: skip
    b.report()
    return b.figures
