"""Prioritized replay: µs per (sample 256 + update their priorities) at 2**20, interleaved:
rlamd's sampler backends (CPU: numba; GPU: Triton, torch, host numba), its whole buffer, each
peer in ``replay`` and numpy's O(N) ``choice``; then an 8-env Atari ``add`` and device bytes
per Atari transition at a million."""

from __future__ import annotations

import numpy as np
import torch

from rlamd.replay import PrioritizedReplayBuffer, PrioritizedSampler, bytes_per_transition
from rlamd.replay.synthetic import filled_replay

from .common import Contender, Figure, each_peer, interleave, measure, ratio, repeat, report, timed

__all__ = ["run_replay_suite"]

ALPHA, BETA = 0.6, 0.4
UNIT = "us per sample+update"


def _fill(sampler, capacity: int, device: torch.device) -> None:
    idx = torch.arange(capacity, device=device)
    sampler.activate(idx[:0], idx)
    g = torch.Generator(device=device).manual_seed(0)
    sampler.update(idx, torch.rand(capacity, generator=g, device=device) * 5)


def _loops(capacity: int, batch: int, iters: int, device: torch.device, g, rng, notes: list):
    """(name, ``iters`` x (draw + write), device, meta) per sampler backend (the first: the
    ratios' base), then the whole buffer (n-step window, vector obs)."""
    cpu, loops, opts = torch.device("cpu"), [], {"alpha": ALPHA, "validate": False}
    gpu = [("triton", device), ("torch", device), ("numba", cpu)]
    for backend, dev in gpu if device.type != "cpu" else [("numba", device), ("torch", device)]:
        try:
            s = PrioritizedSampler(capacity, device=dev, backend=backend, **opts)
        except ValueError as exc:  # e.g. Triton or numba not importable
            notes.append(f"sampler backend {backend} skipped: {exc}")
            continue
        _fill(s, capacity, dev)
        gen = g if dev == device else torch.Generator(device=dev).manual_seed(1)

        def step(s=s, dev=dev, gen=gen) -> None:
            idx, _w = s.sample(batch, gen, beta=BETA)
            s.update(idx, torch.rand(batch, generator=gen, device=dev))

        name = f"rlamd_sampler_{backend}{'' if dev == device else f'_{dev.type}'}"
        loops.append((name, repeat(step, iters), dev, {"backend": backend, "on": str(dev)}))
    opts = {"num_actions": 4, "n_step": 3, "device": device, "validate": False}
    buf = PrioritizedReplayBuffer(capacity, 8, (4,), torch.float32, **opts)
    z, obs = np.zeros(8, dtype=bool), rng.standard_normal((8, 4)).astype(np.float32)
    for _ in range(capacity // 8 + 4):
        buf.storage.add(obs, z.astype(np.int64), z.astype(np.float32), z, z)
    _fill(buf.sampler, capacity, device)
    buf.storage.size = capacity  # all records were activated above

    def whole() -> None:
        b, noise = buf.sample(batch, beta=BETA), torch.rand(batch, generator=g, device=device)
        buf.update_priorities(b.indices, b.returns.abs() + noise)

    return [*loops, ("rlamd_buffer", repeat(whole, iters), device, {})]


def run_replay_suite(
    capacity: int = 2**20,
    batch: int = 256,
    iters: int = 200,
    repeats: int = 5,
    device: torch.device | str = "cpu",
    peers: bool = True,
    notes: list[str] | None = None,
) -> list[Figure]:
    device, notes = torch.device(device), [] if notes is None else notes
    g = torch.Generator(device=device).manual_seed(1)
    rng = np.random.default_rng(0)  # the buffer's observations, then the Atari frames
    loops = _loops(capacity, batch, iters, device, g, rng, notes)
    got = each_peer("replay", peers, notes, lambda p: p.replay(capacity, batch, iters, ALPHA, BETA))
    loops += [(f"{peer.name}_sampler", run, None, {}) for peer, run in got]
    # The O(N) baseline: numpy.random.Generator.choice over normalised priorities.
    pri, nrng = np.random.default_rng(2).uniform(0, 5, capacity) ** ALPHA, np.random.default_rng(3)

    def choice() -> None:
        idx = nrng.choice(capacity, batch, p=pri / pri.sum())
        pri[idx] = nrng.uniform(0, 5, batch) ** ALPHA

    loops.append(("numpy_choice_O(N)", repeat(choice, max(5, iters // 20)), None, {}))
    meta = {"capacity": capacity, "batch": batch}
    contenders = [
        Contender(f"replay/{name}", UNIT, timed(run, device=dev, per="us"), meta | m)
        for name, run, dev, m in loops
    ]
    figures = interleave(contenders, repeats=repeats)
    # Adding one step of an 8-env Atari vector env (frames stored once).
    buf = filled_replay(device, 8 * 4096, steps=0, alpha=ALPHA)
    frames = rng.integers(0, 255, (8, 4, 84, 84), dtype=np.uint8)
    acts, rew, z = np.zeros(8, np.int64), np.zeros(8, np.float32), np.zeros(8, dtype=bool)
    add, unit = repeat(lambda: buf.add(frames, acts, rew, z, z), 500), "us per vector step"
    opts = {"repeats": repeats, "device": device, "per": "us", "num_envs": 8}
    figures.append(measure("replay/rlamd_add_8env_atari", unit, add, **opts))
    per_t = bytes_per_transition((4, 84, 84), torch.uint8, 4, 4, prioritized=True, capacity=10**6)
    name = "replay/bytes_per_atari_transition"
    figures.append(Figure.of(name, "bytes", [per_t], gb_per_million=per_t * 10**6 / 1e9))
    base, rows = figures[0], []
    for f in figures:
        r = ratio(f, base, "ratio_to_rlamd") if f.unit == UNIT else None
        f.meta.setdefault("ratio_to_rlamd", None)
        rows.append((f.name, f"{f.median:,.1f}", f.unit, "" if r is None else r.text()))
    head = (
        f"replay on {device}: capacity {capacity:,}, batch {batch}, alpha {ALPHA}, beta "
        f"{BETA} (median of {repeats} interleaved rounds; ratio = time / {base.name}'s per "
        "round, median (min-max))"
    )
    lines = [f"1M Atari transitions: {per_t / 1e3:.3f} GB on the device"]
    report(head, rows, ("figure", "median", "unit", "vs rlamd"), lines)
    return figures
