"""Prioritized replay: microseconds per (sample 256 + update their priorities) at 2**20.

Compared in one run, interleaved: rlamd's sampler backends (numba on the CPU; on a GPU
Triton, plain torch as the reference, and numba on this host's CPU for scale), rlamd's
whole buffer (n-step windows and observations included), every peer in the ``replay``
measurement, and a numpy O(N) ``choice`` baseline. Also the cost of adding one step of
an 8-env Atari vector env, and device bytes per Atari transition at a million.
"""

from __future__ import annotations

import numpy as np
import torch

from .common import (
    Contender,
    Figure,
    each_peer,
    interleave,
    measure,
    note_ratio,
    print_table,
    ratio,
    timed,
)

__all__ = ["run_replay_suite"]

ALPHA, BETA = 0.6, 0.4
UNIT = "us per sample+update"


def _fill(sampler, capacity: int, device: torch.device) -> None:
    idx = torch.arange(capacity, device=device)
    sampler.activate(idx[:0], idx)
    g = torch.Generator(device=device).manual_seed(0)
    sampler.update(idx, torch.rand(capacity, generator=g, device=device) * 5)


def _samplers(capacity, batch, iters, device, g, notes) -> list[Contender]:
    """rlamd's sampler backends; the first is the ratios' base."""
    from rlamd.replay import PrioritizedSampler

    cpu = torch.device("cpu")
    gpu = device.type != "cpu"
    backends = (
        [("triton", device), ("torch", device), ("numba", cpu)]
        if gpu
        else [("numba", device), ("torch", device)]
    )
    out = []
    for backend, dev in backends:
        try:
            s = PrioritizedSampler(
                capacity, alpha=ALPHA, device=dev, backend=backend, validate=False
            )
        except ValueError as exc:  # e.g. Triton or numba not importable
            notes.append(f"sampler backend {backend} skipped: {exc}")
            continue
        _fill(s, capacity, dev)
        gen = g if dev == device else torch.Generator(device=dev).manual_seed(1)

        def run(s=s, dev=dev, gen=gen) -> int:
            for _ in range(iters):
                idx, _w = s.sample(batch, gen, beta=BETA)
                s.update(idx, torch.rand(batch, generator=gen, device=dev))
            return iters

        where = "" if dev == device else f"_{dev.type}"
        meta = {"capacity": capacity, "batch": batch, "backend": backend, "on": str(dev)}
        out.append(
            Contender(
                f"replay/rlamd_sampler_{backend}{where}",
                UNIT,
                timed(run, device=dev, per="us"),
                meta,
            )
        )
    return out


def _buffer(capacity, batch, iters, device, g, rng) -> Contender:
    """The whole buffer: sampler + n-step window + observations (vector obs, n=3)."""
    from rlamd.replay import PrioritizedReplayBuffer

    buf = PrioritizedReplayBuffer(capacity, 8, (4,), torch.float32, num_actions=4, n_step=3,
                                  device=device, validate=False)  # fmt: skip
    z = np.zeros(8, dtype=bool)
    obs = rng.standard_normal((8, 4)).astype(np.float32)
    for _ in range(capacity // 8 + 4):
        buf.storage.add(obs, z.astype(np.int64), z.astype(np.float32), z, z)
    _fill(buf.sampler, capacity, device)
    buf.storage.size = capacity  # all records were activated above

    def run() -> int:
        for _ in range(iters):
            b = buf.sample(batch, beta=BETA)
            buf.update_priorities(
                b.indices, b.returns.abs() + torch.rand(batch, generator=g, device=device)
            )
        return iters

    meta = {"capacity": capacity, "batch": batch}
    return Contender("replay/rlamd_buffer", UNIT, timed(run, device=device, per="us"), meta)


def _numpy(capacity, batch, iters) -> Contender:
    """The O(N) baseline: ``numpy.random.Generator.choice`` over normalised priorities."""
    pri = np.random.default_rng(2).uniform(0, 5, capacity) ** ALPHA
    nrng, rounds = np.random.default_rng(3), max(5, iters // 20)

    def run() -> int:
        for _ in range(rounds):
            idx = nrng.choice(capacity, batch, p=pri / pri.sum())
            pri[idx] = nrng.uniform(0, 5, batch) ** ALPHA
        return rounds

    meta = {"capacity": capacity, "batch": batch}
    return Contender("replay/numpy_choice_O(N)", UNIT, timed(run, per="us"), meta)


def _add(repeats: int, device: torch.device, rng) -> Figure:
    """Adding one step of an 8-env Atari vector env (frames stored once)."""
    from rlamd.replay import PrioritizedReplayBuffer

    buf = PrioritizedReplayBuffer(8 * 4096, 8, (4, 84, 84), torch.uint8, frame_stack=4,
                                  num_actions=4, n_step=3, device=device)  # fmt: skip
    frames = rng.integers(0, 255, (8, 4, 84, 84), dtype=np.uint8)
    acts, rew, z = np.zeros(8, np.int64), np.zeros(8, np.float32), np.zeros(8, dtype=bool)

    def run() -> int:
        for _ in range(500):
            buf.add(frames, acts, rew, z, z)
        return 500

    return measure("replay/rlamd_add_8env_atari", "us per vector step", run, repeats=repeats,
                   device=device, per="us", num_envs=8)  # fmt: skip


def run_replay_suite(capacity: int = 2**20, batch: int = 256, iters: int = 200, repeats: int = 5,
                     device: torch.device | str = "cpu", peers: bool = True,
                     notes: list[str] | None = None) -> list[Figure]:  # fmt: skip
    from rlamd.replay import bytes_per_transition

    device, notes = torch.device(device), [] if notes is None else notes
    g = torch.Generator(device=device).manual_seed(1)
    rng = np.random.default_rng(0)  # the buffer's observations, then the Atari frames
    contenders = _samplers(capacity, batch, iters, device, g, notes)
    contenders.append(_buffer(capacity, batch, iters, device, g, rng))
    for peer, run in each_peer(
        "replay", peers, notes, lambda p: p.replay(capacity, batch, iters, ALPHA, BETA)
    ):
        meta = {"capacity": capacity, "batch": batch}
        contenders.append(
            Contender(f"replay/{peer.name}_sampler", UNIT, timed(run, per="us"), meta)
        )
    contenders.append(_numpy(capacity, batch, iters))
    figures = interleave(contenders, repeats=repeats)
    figures.append(_add(repeats, device, rng))
    per_t = bytes_per_transition((4, 84, 84), torch.uint8, 4, 4, prioritized=True, capacity=10**6)
    figures.append(Figure.of("replay/bytes_per_atari_transition", "bytes", [per_t],
                             gb_per_million=per_t * 10**6 / 1e9))  # fmt: skip
    base = figures[0]
    rows = []
    for f in figures:
        r = ratio(f, base) if f.unit == UNIT else None
        if r is None:
            f.meta["ratio_to_rlamd"] = None
        else:
            note_ratio(f, "ratio_to_rlamd", r)
        rows.append((f.name, f"{f.median:,.1f}", f.unit, "" if r is None else r.text()))
    print(f"\nreplay on {device}: capacity {capacity:,}, batch {batch}, alpha {ALPHA}, beta {BETA} "
          f"(median of {repeats} interleaved rounds; ratio = time / {base.name}'s per round, "
          "median (min-max))")  # fmt: skip
    print_table(rows, ("figure", "median", "unit", "vs rlamd"))
    print(f"1M Atari transitions: {per_t / 1e3:.3f} GB on the device")
    return figures
