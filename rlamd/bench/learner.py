"""Learner throughput without envs, per precision, eager and (on GPUs) CUDA/HIP graph:

* DQN updates/s on synthetic Atari batches already on the device (``agent.update``);
* the DQN learn step from a prioritized replay (sample, update, target sync, priority
  write: ``agent.learn``, what training runs), eager and graph-captured, at the largest
  batch;
* PPO minibatch updates/s, eager and graph-captured;

and what one learn step costs: kernels (GPU) or leaf ops (CPU), host submissions, host
µs to issue it and device µs of kernel time (``torch.profiler``). The variants of one
figure (precisions, graph on and off) are timed in interleaved rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import torch

from .common import Contender, Figure, interleave, print_table, step_cost, timed

__all__ = ["run_learner_suite"]


def _precisions(device: torch.device, native_bf16: bool) -> list[str]:
    if device.type == "cuda":
        return ["fp32", "bf16", "fp16"] if native_bf16 else ["fp32", "fp16"]
    # Without native bf16 a CPU emulates it (several times slower; `auto` never picks it).
    return ["fp32", "bf16"] if native_bf16 else ["fp32"]


def _graph_modes(device: torch.device) -> list[str]:
    return ["off", "on"] if device.type == "cuda" else ["off"]


def filled_replay(
    device: torch.device,
    capacity: int = 8 * 1024,
    seed: int = 0,
    *,
    prioritized: bool = True,
    steps: int = 512,
    **options: Any,
):
    """An Atari-shaped replay (8 envs, uint8 4x84x84, 3-step) after ``steps`` vector steps
    (4K records by default), prioritized (alpha 0.5) or uniform; ``options`` go to the
    buffer (``backend``, ``validate``, ...)."""
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
        done = (np.arange(8) + t) % 97 == 0
        obs = frames[t % 16]
        buf.add(obs, rng.integers(0, 4, 8), rng.normal(size=8).astype(np.float32), z, done, obs)
    return buf


def _dqn_batch(batch: int, device: torch.device, g: torch.Generator):
    """A synthetic Atari-shaped DQN batch on the device (drawn from ``g``)."""
    from rlamd.replay import ReplayBatch

    return ReplayBatch(
        torch.randint(0, 255, (batch, 4, 84, 84), dtype=torch.uint8, device=device, generator=g),
        torch.randint(0, 4, (batch,), device=device, generator=g),
        torch.randn(batch, device=device, generator=g),
        torch.randint(0, 255, (batch, 4, 84, 84), dtype=torch.uint8, device=device, generator=g),
        torch.full((batch,), 0.97, device=device),
        torch.ones(batch, device=device),
        torch.arange(batch, device=device),
    )


def _repeat(fn: Callable[[], object], iters: int) -> Callable[[], int]:
    """``iters`` calls of ``fn`` as one timed unit of work."""

    def run() -> int:
        for _ in range(iters):
            fn()
        return iters

    return run


@dataclass
class _LearnerBench:
    """One suite run: its settings and the figures, table rows and step costs it collects."""

    device: torch.device
    iters: int
    repeats: int
    g: torch.Generator
    warm: int = 5
    """Calls before timing: > the capture's warm-up, so graphs are captured first."""
    figures: list[Figure] = field(default_factory=list)
    rows: list[tuple[str, ...]] = field(default_factory=list)
    costs: list[tuple[str, ...]] = field(default_factory=list)

    def _cost_row(
        self, label: str, precision: str, batch: int, graph: str, fn, fig: Figure
    ) -> None:
        c = step_cost(fn, self.device)
        fig.meta.update(c.to_dict())
        self.costs.append((label, precision, str(batch), graph, *c.cells()))

    def _timed_rows(
        self, label: str, built: list[tuple[str, dict[str, Any], Callable[[], object]]]
    ) -> list[Figure]:
        """Interleave ``(name, meta, step)`` contenders; add a throughput row per figure."""
        contenders = [
            Contender(name, "updates/s", timed(_repeat(step, self.iters), device=self.device), meta)
            for name, meta, step in built
        ]
        figures = interleave(contenders, repeats=self.repeats)
        for f in figures:
            m = f.meta
            self.rows.append(
                (label, m["precision"], str(m["batch"]), m.get("graph", "off"), f"{f.median:,.1f}")
            )
        self.figures += figures
        return figures

    def dqn_update(self, precisions: list[str], batch: int) -> None:
        """DQN updates/s on one synthetic batch already on the device (``agent.update_on``:
        the learn step without sampling and priorities), each precision interleaved."""
        from rlamd.agents.dqn import DQN, DQNConfig
        from rlamd.precision import Precision

        device = self.device
        b = _dqn_batch(batch, device, self.g)
        built = []
        for precision in precisions:
            agent = DQN(DQNConfig(), (4, 84, 84), 4, device, Precision(precision, device))
            meta = {"precision": precision, "batch": batch, "device": str(device)}
            built.append((f"learner/dqn/{precision}/b{batch}", meta, partial(agent.update_on, b)))
        self._timed_rows("DQN update", built)

    def dqn_learn(self, variants: list[tuple[str, str]], batch: int, buf) -> None:
        """The DQN learn step from the prioritized replay ``buf`` (``agent.learn``) for each
        (precision, graph mode), interleaved, with its step cost."""
        from rlamd.agents.dqn import DQN, DQNConfig
        from rlamd.algos.dqn import capture_dqn
        from rlamd.graphs import graphs_enabled
        from rlamd.precision import Precision

        device = self.device
        built, steps = [], []
        for precision, mode in variants:
            agent = DQN(
                DQNConfig(),
                (4, 84, 84),
                4,
                device,
                Precision(precision, device),
                capturable=graphs_enabled(mode, device),
            )
            agent = capture_dqn(agent, mode)
            step = partial(agent.learn, buf, batch, 0.5)
            for _ in range(self.warm):
                step()
            meta = {
                "precision": precision,
                "batch": batch,
                "graph": mode,
                "captured": agent.learn_step.captured,
            }
            built.append((f"learner/dqn_learn/{precision}/b{batch}/graph_{mode}", meta, step))
            steps.append(step)
        figures = self._timed_rows("DQN learn step (replay)", built)
        for f, step, (precision, mode) in zip(figures, steps, variants, strict=True):
            self._cost_row("DQN learn step", precision, batch, mode, step, f)

    def ppo_minibatch(self, variants: list[tuple[str, str]], mb: int) -> None:
        """PPO minibatch updates/s on ``mb`` synthetic rows (one epoch, one minibatch) for
        each (precision, graph mode), interleaved."""
        from rlamd.agents.ppo import PPO, PPOConfig
        from rlamd.algos.ppo import capture_ppo
        from rlamd.graphs import graphs_enabled
        from rlamd.precision import Precision

        device = self.device
        cfg = PPOConfig(num_steps=32, num_minibatches=1, update_epochs=1)
        rows_ = _ppo_rows(mb, device, self.g)
        built, steps = [], []
        for precision, mode in variants:
            capturable = graphs_enabled(mode, device)
            agent = PPO(
                cfg, (4, 84, 84), 4, device, Precision(precision, device), capturable=capturable
            )
            agent = capture_ppo(agent, mode)
            step = partial(agent.learn, rows_)
            for _ in range(self.warm):
                step()
            meta = {"precision": precision, "batch": mb, "graph": mode}
            built.append((f"learner/ppo/{precision}/mb{mb}/graph_{mode}", meta, step))
            steps.append(step)
        figures = self._timed_rows("PPO minibatch", built)
        for f, step, (precision, mode) in zip(figures, steps, variants, strict=True):
            self._cost_row("PPO minibatch", precision, mb, mode, step, f)

    def report(self) -> None:
        """Print the throughput table and, when measured, the step-cost table."""
        device = self.device
        print(
            f"\nlearner on {device}: Nature CNN, Atari-shaped batches on the device "
            f"(median of {self.repeats} x {self.iters})"
        )
        print_table(self.rows, ("update", "precision", "batch", "graph", "updates/s"))
        if not self.costs:
            return
        unit = "kernels" if device.type == "cuda" else "ops"
        print(
            f"\nper learn step on {device} (torch.profiler; {unit}: "
            + ("GPU kernels run" if device.type == "cuda" else "leaf ATen ops doing work")
            + "; launches: host submissions; host µs: time to issue it)"
        )
        print_table(
            self.costs,
            ("step", "precision", "batch", "graph", unit, "launches", "host µs", "device µs"),
        )


def run_learner_suite(
    device: torch.device | str = "cpu",
    batches: tuple[int, ...] = (32, 128, 512),
    iters: int = 10,
    repeats: int = 3,
    ppo: bool = True,
    replay: bool = True,
) -> list[Figure]:
    from rlamd.device import describe_device

    device = torch.device(device)
    info = describe_device(device)
    bench = _LearnerBench(device, iters, repeats, torch.Generator(device=device).manual_seed(0))
    mb = 256  # PPO minibatch: 8 envs x 128 steps / 4
    buf = filled_replay(device) if replay else None
    precisions = _precisions(device, info.bf16)
    variants = [(p, m) for p in precisions for m in _graph_modes(device)]
    for batch in batches:
        bench.dqn_update(precisions, batch)
        if buf is not None and batch == max(batches):
            bench.dqn_learn(variants, batch, buf)
    if ppo:
        bench.ppo_minibatch(variants, mb)
    bench.report()
    return bench.figures


def _ppo_rows(mb: int, device: torch.device, g: torch.Generator):
    from rlamd.agents.ppo import PPORows

    return PPORows(
        torch.randint(0, 255, (mb, 4, 84, 84), dtype=torch.uint8, device=device, generator=g),
        torch.randint(0, 4, (mb,), device=device, generator=g),
        torch.zeros(mb, device=device),
        torch.zeros(mb, device=device),
        torch.randn(mb, device=device, generator=g),
        torch.zeros(mb, device=device),
    )
