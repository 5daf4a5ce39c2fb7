"""Prioritized replay: microseconds per (sample 256 + update their priorities) at 2**20.

Compared in one run, interleaved (every contender once per round): rlamd's sampler backends (numba kernels on the CPU; on a GPU the
Triton kernels, plain torch ops as the reference, and numba on this host's CPU for
scale), rlamd's whole buffer (n-step windows and observations included), TorchRL's
C++ ``PrioritizedSampler`` when it loads, and a numpy O(N) ``choice`` baseline. Also the
cost of adding one step of an 8-env Atari vector env, and device bytes per Atari
transition at a million.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .common import Contender, Figure, interleave, measure, note_ratio, print_table, ratio, timed
from .peers import PeerUnavailable, torchrl_prioritized_sampler

__all__ = ["run_replay_suite"]

ALPHA, BETA = 0.6, 0.4


def _fill_sampler(sampler, capacity: int, device: torch.device) -> None:
    idx = torch.arange(capacity, device=device)
    sampler.activate(idx[:0], idx)
    g = torch.Generator(device=device).manual_seed(0)
    sampler.update(idx, torch.rand(capacity, generator=g, device=device) * 5)


@dataclass(frozen=True)
class _Plan:
    """What every timed loop of one suite run uses."""

    capacity: int
    """Records in each sampler and buffer."""
    batch: int
    """Indices drawn (and priorities written) per iteration."""
    iters: int
    """Iterations per timed repeat."""
    repeats: int
    """Timed repeats; figures are their medians."""


def _sampler_contenders(
    plan: _Plan, device: torch.device, g: torch.Generator, notes: list[str]
) -> list[Contender]:
    """rlamd's sampler backends alone. (backend, device): the GPU figure sets Triton
    against the torch reference and against numba on this host's CPU; the first entry is
    the ratios' base."""
    from rlamd.replay import PrioritizedSampler

    def sampler_loop(sampler, dev: torch.device, gen: torch.Generator):
        def run() -> int:
            for _ in range(plan.iters):
                idx, _w = sampler.sample(plan.batch, gen, beta=BETA)
                sampler.update(idx, torch.rand(plan.batch, generator=gen, device=dev))
            return plan.iters

        return run

    if device.type == "cpu":
        backends = [("numba", device), ("torch", device)]
    else:
        backends = [("triton", device), ("torch", device), ("numba", torch.device("cpu"))]
    figures = []
    for backend, dev in backends:
        try:
            s = PrioritizedSampler(
                plan.capacity, alpha=ALPHA, device=dev, backend=backend, validate=False
            )
        except ValueError as exc:  # e.g. Triton or numba not importable
            notes.append(f"sampler backend {backend} skipped: {exc}")
            continue
        _fill_sampler(s, plan.capacity, dev)
        gen = g if dev == device else torch.Generator(device=dev).manual_seed(1)
        where = "" if dev == device else f"_{dev.type}"
        figures.append(
            Contender(
                f"replay/rlamd_sampler_{backend}{where}",
                "us per sample+update",
                timed(sampler_loop(s, dev, gen), device=dev, per="us"),
                {
                    "capacity": plan.capacity,
                    "batch": plan.batch,
                    "backend": backend,
                    "on": str(dev),
                },
            )
        )
    return figures


def _buffer_contender(
    plan: _Plan, device: torch.device, g: torch.Generator, rng: np.random.Generator
) -> Contender:
    """The whole buffer: sampler + n-step window + observations (vector obs, n=3)."""
    from rlamd.replay import PrioritizedReplayBuffer

    capacity, batch = plan.capacity, plan.batch
    buf = PrioritizedReplayBuffer(
        capacity, 8, (4,), torch.float32, num_actions=4, n_step=3, device=device, validate=False
    )
    z = np.zeros(8, dtype=bool)
    obs = rng.standard_normal((8, 4)).astype(np.float32)
    for _ in range(capacity // 8 + 4):
        buf.storage.add(obs, z.astype(np.int64), z.astype(np.float32), z, z)
    _fill_sampler(buf.sampler, capacity, device)
    buf.storage.size = capacity  # all records were activated above

    def buffer_loop() -> int:
        for _ in range(plan.iters):
            b = buf.sample(batch, beta=BETA)
            buf.update_priorities(
                b.indices, b.returns.abs() + torch.rand(batch, generator=g, device=device)
            )
        return plan.iters

    return Contender(
        "replay/rlamd_buffer",
        "us per sample+update",
        timed(buffer_loop, device=device, per="us"),
        {"capacity": capacity, "batch": batch},
    )


def _torchrl_contender(plan: _Plan, peers: bool) -> Contender:
    """TorchRL's C++ sampler; raises :class:`PeerUnavailable` or ImportError when it
    cannot (or must not) run."""
    if not peers:
        raise PeerUnavailable("--no-peers")
    from torchrl.data import LazyTensorStorage

    capacity = plan.capacity
    peer = torchrl_prioritized_sampler(capacity, ALPHA, BETA)
    storage = LazyTensorStorage(capacity)
    storage.set(torch.arange(capacity), torch.zeros(capacity, 1))
    peer.update_priority(torch.arange(capacity), torch.rand(capacity) * 5 + 1e-3)

    def torchrl_loop() -> int:
        for _ in range(plan.iters):
            idx, _info = peer.sample(storage, plan.batch)
            peer.update_priority(idx, torch.rand(plan.batch))
        return plan.iters

    return Contender(
        "replay/torchrl_sampler",
        "us per sample+update",
        timed(torchrl_loop, per="us"),
        {"capacity": capacity, "batch": plan.batch},
    )


def _numpy_contender(plan: _Plan) -> Contender:
    """The O(N) baseline: ``numpy.random.Generator.choice`` over normalised priorities."""
    capacity, batch = plan.capacity, plan.batch
    pri = np.random.default_rng(2).uniform(0, 5, capacity) ** ALPHA
    nrng = np.random.default_rng(3)
    rounds = max(5, plan.iters // 20)

    def numpy_loop() -> int:
        for _ in range(rounds):
            idx = nrng.choice(capacity, batch, p=pri / pri.sum())
            pri[idx] = nrng.uniform(0, 5, batch) ** ALPHA
        return rounds

    return Contender(
        "replay/numpy_choice_O(N)",
        "us per sample+update",
        timed(numpy_loop, per="us"),
        {"capacity": capacity, "batch": batch},
    )


def _add_figure(plan: _Plan, device: torch.device, rng: np.random.Generator) -> Figure:
    """Adding one step of an 8-env Atari vector env (frames stored once)."""
    from rlamd.replay import PrioritizedReplayBuffer

    atari = PrioritizedReplayBuffer(
        8 * 4096, 8, (4, 84, 84), torch.uint8, frame_stack=4, num_actions=4, n_step=3, device=device
    )
    frames = rng.integers(0, 255, (8, 4, 84, 84), dtype=np.uint8)
    acts, rew = np.zeros(8, np.int64), np.zeros(8, np.float32)
    z = np.zeros(8, dtype=bool)

    def add_loop() -> int:
        for _ in range(500):
            atari.add(frames, acts, rew, z, z)
        return 500

    return measure(
        "replay/rlamd_add_8env_atari",
        "us per vector step",
        add_loop,
        repeats=plan.repeats,
        device=device,
        per="us",
        num_envs=8,
    )


def _bytes_figure(million: int) -> Figure:
    """Device bytes per Atari transition in a prioritized buffer of ``million`` records."""
    from rlamd.replay import bytes_per_transition

    per_t = bytes_per_transition((4, 84, 84), torch.uint8, 4, 4, prioritized=True, capacity=million)
    return Figure(
        "replay/bytes_per_atari_transition",
        "bytes",
        per_t,
        per_t,
        per_t,
        [per_t],
        {"gb_per_million": per_t * million / 1e9},
    )


def run_replay_suite(
    capacity: int = 2**20,
    batch: int = 256,
    iters: int = 200,
    repeats: int = 5,
    device: torch.device | str = "cpu",
    peers: bool = True,
    notes: list[str] | None = None,
) -> list[Figure]:
    device = torch.device(device)
    notes = [] if notes is None else notes
    plan = _Plan(capacity, batch, iters, repeats)
    g = torch.Generator(device=device).manual_seed(1)
    rng = np.random.default_rng(0)  # the buffer's observations, then the Atari frames
    contenders = _sampler_contenders(plan, device, g, notes)
    contenders.append(_buffer_contender(plan, device, g, rng))
    try:
        contenders.append(_torchrl_contender(plan, peers))
    except (PeerUnavailable, ImportError) as exc:
        notes.append(f"TorchRL skipped: {exc}")
    contenders.append(_numpy_contender(plan))
    figures = interleave(contenders, repeats=plan.repeats)
    figures.append(_add_figure(plan, device, rng))
    million = 1_000_000
    size = _bytes_figure(million)
    figures.append(size)

    base = next(f for f in figures if f.name.startswith("replay/rlamd_sampler"))
    rows = []
    for f in figures:
        r = ratio(f, base) if "per sample+update" in f.unit else None
        if r is None:
            f.meta["ratio_to_rlamd"] = None
        else:
            note_ratio(f, "ratio_to_rlamd", r)
        rows.append((f.name, f"{f.median:,.1f}", f.unit, "" if r is None else r.text()))
    print(
        f"\nreplay on {device}: capacity {capacity:,}, batch {batch}, alpha {ALPHA}, beta {BETA} "
        f"(median of {repeats} interleaved rounds; ratio = time / {base.name}'s per round, "
        "median (min-max))"
    )
    print_table(rows, ("figure", "median", "unit", "vs rlamd"))
    print(f"1M Atari transitions: {size.median * million / 1e9:.3f} GB on the device")
    return figures
