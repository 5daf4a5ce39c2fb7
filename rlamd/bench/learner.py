"""Learner updates/s without envs, per precision, eager and (on GPUs) graph-captured: DQN
on synthetic Atari batches (``update_on``), its learn step from prioritized replay at the
largest batch (``learn``), PPO minibatches; with each learn step's cost (``step_cost``)."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from rlamd.agents.dqn import DQN, DQNConfig
from rlamd.agents.ppo import PPO, PPOConfig, PPORows
from rlamd.algos.dqn import capture_dqn
from rlamd.algos.ppo import capture_ppo
from rlamd.device import describe_device
from rlamd.graphs import graphs_enabled
from rlamd.precision import Precision
from rlamd.replay import ReplayBatch
from rlamd.replay.synthetic import ATARI, filled_replay

from .common import Contender, Figure, interleave, repeat, report, report_costs, step_cost, timed

__all__ = ["run_learner_suite"]

WARM = 5  # calls before timing: more than the capture's warm-up, so graphs are captured first


def _agent(kind: str, precision: str, mode: str | None, device: torch.device):
    """rlamd's DQN or PPO on Atari shapes, captured with graph ``mode`` (None: not at all)."""
    p, graphs = Precision(precision, device), graphs_enabled(mode or "off", device)
    if kind == "ppo":
        cfg = PPOConfig(num_steps=32, num_minibatches=1, update_epochs=1)
        return capture_ppo(PPO(cfg, *ATARI, device, p, capturable=graphs), mode)
    if mode is None:
        return DQN(DQNConfig(), *ATARI, device, p)
    return capture_dqn(DQN(DQNConfig(), *ATARI, device, p, capturable=graphs), mode)


class _Suite:
    """One suite run: its tensors' generator, the figures and the rows it collects."""

    def __init__(self, device: torch.device, iters: int, repeats: int) -> None:
        self.device, self.iters, self.repeats = device, iters, repeats
        self.g = torch.Generator(device=device).manual_seed(0)
        self.rows, self.figures, self.costs = [], [], []
        gpu = device.type == "cuda"
        # Without native bf16 a CPU emulates it (several times slower; `auto` never picks it).
        bf16 = ["bf16"] if describe_device(device).bf16 else []
        self.precisions = ["fp32", *bf16, *(["fp16"] if gpu else [])]
        modes = ("off", "on") if gpu else ("off",)
        self.variants = [(p, m) for p in self.precisions for m in modes]

    def frames(self, n: int) -> torch.Tensor:
        shape, d = (n, *ATARI[0]), self.device
        return torch.randint(0, 255, shape, dtype=torch.uint8, device=d, generator=self.g)

    def ints(self, n: int) -> torch.Tensor:
        return torch.randint(0, 4, (n,), device=self.device, generator=self.g)

    def time(self, label: str, built: list, cost: bool) -> None:
        """Interleave ``(name, meta, step)``; a table row per figure; with ``cost``, the steps
        are warmed up first (:data:`WARM`) and each gets a step-cost row."""
        d, n = self.device, self.iters
        for _, _, step in built if cost else []:
            repeat(step, WARM)()
        contenders = [
            Contender(name, "updates/s", timed(repeat(step, n), device=d), meta)
            for name, meta, step in built
        ]
        figures = interleave(contenders, repeats=self.repeats)
        for f, (_, m, step) in zip(figures, built, strict=True):
            cells = (m["precision"], str(m["batch"]), m.get("graph", "off"))
            self.rows.append((label, *cells, f"{f.median:,.1f}"))
            self.figures.append(f)
            if cost:
                self.costs.append((label.split(" (")[0], *cells, *step_cost(step, d, f)))

    def dqn(self, b: int, buf: Any) -> None:
        """DQN updates on a synthetic batch of ``b``; with ``buf``, learn steps from it."""
        d, randn = self.device, torch.randn(b, device=self.device, generator=self.g)
        obs, actions, next_obs = self.frames(b), self.ints(b), self.frames(b)
        gamma, ones = torch.full((b,), 0.97, device=d), torch.ones(b, device=d)
        data = ReplayBatch(obs, actions, randn, next_obs, gamma, ones, torch.arange(b, device=d))
        meta, built = {"batch": b, "device": str(d)}, []
        for p in self.precisions:
            step = partial(_agent("dqn", p, None, d).update_on, data)
            built.append((f"learner/dqn/{p}/b{b}", {"precision": p, **meta}, step))
        self.time("DQN update", built, False)
        if buf is None:
            return
        built = []
        for p, mode in self.variants:
            agent = _agent("dqn", p, mode, d)
            m = {"precision": p, "batch": b, "graph": mode, "captured": agent.learn_step.captured}
            step = partial(agent.learn, buf, b, 0.5)
            built.append((f"learner/dqn_learn/{p}/b{b}/graph_{mode}", m, step))
        self.time("DQN learn step (replay)", built, True)

    def ppo(self, mb: int = 256) -> None:
        """PPO minibatch updates (256: 8 envs x 128 steps / 4 minibatches)."""
        d, z = self.device, torch.zeros(mb, device=self.device)
        advantages = torch.randn(mb, device=d, generator=self.g)
        rows = PPORows(self.frames(mb), self.ints(mb), z, z.clone(), advantages, z.clone())
        built = []
        for p, mode in self.variants:
            step = partial(_agent("ppo", p, mode, d).learn, rows)
            m = {"precision": p, "batch": mb, "graph": mode}
            built.append((f"learner/ppo/{p}/mb{mb}/graph_{mode}", m, step))
        self.time("PPO minibatch", built, True)


def run_learner_suite(
    device: torch.device | str = "cpu",
    batches: tuple[int, ...] = (32, 128, 512),
    iters: int = 10,
    repeats: int = 3,
) -> list[Figure]:
    device = torch.device(device)
    suite, buf = _Suite(device, iters, repeats), filled_replay(device)
    for b in batches:
        suite.dqn(b, buf if b == max(batches) else None)
    suite.ppo()
    head = f"learner on {device}: Nature CNN, Atari-shaped batches on the device (median of "
    columns = ("update", "precision", "batch", "graph", "updates/s")
    report(f"{head}{repeats} x {iters})", suite.rows, columns)
    report_costs("learn step", device, suite.costs, ("step", "precision", "batch", "graph"))
    return suite.figures
