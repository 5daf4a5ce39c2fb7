"""Prioritized replay: microseconds per (sample 256 + update their priorities) at 2**20.

Compared in one run: rlamd's sampler (numba kernels on the CPU, plain torch ops as the
reference), rlamd's whole buffer (n-step windows and observations included), TorchRL's
C++ ``PrioritizedSampler`` when it loads, and a numpy O(N) ``choice`` baseline. Also the
cost of adding one step of an 8-env Atari vector env, and device bytes per Atari
transition at a million.
"""

from __future__ import annotations

import numpy as np
import torch

from .common import Figure, measure, print_table
from .peers import PeerUnavailable, torchrl_prioritized_sampler

__all__ = ["run_replay_suite"]

ALPHA, BETA = 0.6, 0.4


def _fill_sampler(sampler, capacity: int, device: torch.device) -> None:
    idx = torch.arange(capacity, device=device)
    sampler.activate(idx[:0], idx)
    g = torch.Generator(device=device).manual_seed(0)
    sampler.update(idx, torch.rand(capacity, generator=g, device=device) * 5)


def run_replay_suite(
    capacity: int = 2**20,
    batch: int = 256,
    iters: int = 200,
    repeats: int = 5,
    device: torch.device | str = "cpu",
    peers: bool = True,
    notes: list[str] | None = None,
) -> list[Figure]:
    from rlamd.replay import PrioritizedReplayBuffer, PrioritizedSampler

    device = torch.device(device)
    figures: list[Figure] = []
    notes = [] if notes is None else notes
    g = torch.Generator(device=device).manual_seed(1)

    def sampler_loop(sampler):
        def run() -> int:
            for _ in range(iters):
                idx, _w = sampler.sample(batch, g, capacity, beta=BETA)
                sampler.update(idx, torch.rand(batch, generator=g, device=device))
            return iters

        return run

    backends = ["numba", "torch"] if device.type == "cpu" else ["torch"]
    for backend in backends:
        s = PrioritizedSampler(
            capacity, alpha=ALPHA, device=device, backend=backend, validate=False
        )
        _fill_sampler(s, capacity, device)
        figures.append(
            measure(f"replay/rlamd_sampler_{backend}", "us per sample+update", sampler_loop(s),
                    repeats=repeats, device=device, per="us", capacity=capacity, batch=batch)
        )  # fmt: skip

    # The whole buffer: sampler + n-step window + observations (vector obs, n=3).
    buf = PrioritizedReplayBuffer(
        capacity, 8, (4,), torch.float32, num_actions=4, n_step=3, device=device, validate=False
    )
    rng = np.random.default_rng(0)
    z = np.zeros(8, dtype=bool)
    obs = rng.standard_normal((8, 4)).astype(np.float32)
    for _ in range(capacity // 8 + 4):
        buf.storage.add(obs, z.astype(np.int64), z.astype(np.float32), z, z)
    _fill_sampler(buf.sampler, capacity, device)
    buf.storage.size = capacity  # all records were activated above

    def buffer_loop() -> int:
        for _ in range(iters):
            b = buf.sample(batch, beta=BETA)
            buf.update_priorities(
                b.indices, b.returns.abs() + torch.rand(batch, generator=g, device=device)
            )
        return iters

    figures.append(measure("replay/rlamd_buffer", "us per sample+update", buffer_loop,
                           repeats=repeats, device=device, per="us", capacity=capacity, batch=batch))  # fmt: skip

    try:
        if not peers:
            raise PeerUnavailable("--no-peers")
        from torchrl.data import LazyTensorStorage

        peer = torchrl_prioritized_sampler(capacity, ALPHA, BETA)
        storage = LazyTensorStorage(capacity)
        storage.set(torch.arange(capacity), torch.zeros(capacity, 1))
        peer.update_priority(torch.arange(capacity), torch.rand(capacity) * 5 + 1e-3)

        def torchrl_loop() -> int:
            for _ in range(iters):
                idx, _info = peer.sample(storage, batch)
                peer.update_priority(idx, torch.rand(batch))
            return iters

        figures.append(measure("replay/torchrl_sampler", "us per sample+update", torchrl_loop,
                               repeats=repeats, per="us", capacity=capacity, batch=batch))  # fmt: skip
    except (PeerUnavailable, ImportError) as exc:
        notes.append(f"TorchRL skipped: {exc}")

    pri = np.random.default_rng(2).uniform(0, 5, capacity) ** ALPHA
    nrng = np.random.default_rng(3)

    def numpy_loop() -> int:
        for _ in range(max(5, iters // 20)):
            idx = nrng.choice(capacity, batch, p=pri / pri.sum())
            pri[idx] = nrng.uniform(0, 5, batch) ** ALPHA
        return max(5, iters // 20)

    figures.append(measure("replay/numpy_choice_O(N)", "us per sample+update", numpy_loop,
                           repeats=repeats, per="us", capacity=capacity, batch=batch))  # fmt: skip

    # Adding one step of an 8-env Atari vector env (frames stored once).
    atari = PrioritizedReplayBuffer(8 * 4096, 8, (4, 84, 84), torch.uint8, frame_stack=4,
                                    num_actions=4, n_step=3, device=device)  # fmt: skip
    frames = rng.integers(0, 255, (8, 4, 84, 84), dtype=np.uint8)
    acts, rew = np.zeros(8, np.int64), np.zeros(8, np.float32)

    def add_loop() -> int:
        for _ in range(500):
            atari.add(frames, acts, rew, z, z)
        return 500

    figures.append(measure("replay/rlamd_add_8env_atari", "us per vector step", add_loop,
                           repeats=repeats, device=device, per="us", num_envs=8))  # fmt: skip
    from rlamd.replay import SegmentTree

    million = 1_000_000
    tree = SegmentTree(million, backend="torch", device="cpu").nbytes()
    per_t = atari.storage.bytes_per_record() + 2 * tree / million
    figures.append(Figure("replay/bytes_per_atari_transition", "bytes", per_t, per_t, per_t, [per_t],
                          {"gb_per_million": per_t * million / 1e9}))  # fmt: skip

    base = next(f for f in figures if f.name.startswith("replay/rlamd_sampler"))
    rows = []
    for f in figures:
        ratio = f.median / base.median if "per sample+update" in f.unit else None
        f.meta["ratio_to_rlamd"] = ratio
        rows.append((f.name, f"{f.median:,.1f}", f.unit, "" if ratio is None else f"{ratio:.2f}x"))
    print(f"\nreplay on {device}: capacity {capacity:,}, batch {batch}, alpha {ALPHA}, beta {BETA} "
          f"(median of {repeats}; ratio = time / rlamd sampler's)")  # fmt: skip
    print_table(rows, ("figure", "median", "unit", "vs rlamd"))
    print(f"1M Atari transitions: {per_t * million / 1e9:.3f} GB on the device")
    return figures
