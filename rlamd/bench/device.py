"""The ceilings. ``device``: copy bandwidths and matmul TFLOP/s per precision (as
rocm-bandwidth-test). ``env``: ``make_env``'s env steps/s against raw ``AtariVectorEnv``
(rlamd's bookkeeping must keep >= 0.9 of it; same preprocessing, interleaved)."""

from __future__ import annotations

from itertools import cycle

import numpy as np
import torch

from rlamd.envs import AtariConfig, make_env
from rlamd.envs.atari import env_threads

from .common import Contender, Figure, interleave, measure, ratio, repeat, report, timed

__all__ = ["raw_env", "run_device_suite", "run_env_suite", "stepping"]


def run_device_suite(device: torch.device | str = "cpu", quick: bool = False, repeats: int = 5):
    """GB/s of host->device, device->host and device->device copies (pinned host memory on
    GPUs), then square matmul TFLOP/s per precision (no fp16 on the CPU: its fp16 matmul is
    unoptimised and no CPU training uses it)."""
    device = torch.device(device)
    gpu = device.type == "cuda"
    n = ((64 if quick else 256) if gpu else (32 if quick else 128)) * 2**20 // 4
    host = torch.ones(n, dtype=torch.float32, pin_memory=gpu)
    dev_a = torch.empty(n, dtype=torch.float32, device=device)
    dev_b, figures, opts = torch.empty_like(dev_a), [], {"repeats": repeats, "device": device}
    pairs = (("host->device", dev_a, host), ("device->host", host, dev_a))
    for name, dst, src in (*pairs, ("device->device", dev_b, dev_a)):
        copy = repeat(lambda d=dst, s=src: d.copy_(s, non_blocking=True), 5, 5 * n * 4 / 1e9)
        figures.append(measure(f"device/bandwidth/{name}", "GB/s", copy, **opts, bytes=n * 4))
    size = (2048 if quick else 4096) if gpu else (1024 if quick else 2048)
    reps, dtypes = 20 if gpu else 3, {"fp32": torch.float32, "bf16": torch.bfloat16}
    for label, dtype in (dtypes | ({"fp16": torch.float16} if gpu else {})).items():
        a, b = (torch.randn(size, size, device=device).to(dtype) for _ in range(2))
        mm = repeat(lambda a=a, b=b: torch.mm(a, b), reps, reps * 2 * size**3 / 1e12)
        figures.append(measure(f"device/matmul/{label}", "TFLOP/s", mm, **opts, size=size))
    rows = [(f.name.removeprefix("device/"), f"{f.median:,.3f}", f.unit) for f in figures]
    report(f"device: {device} (median of {repeats})", rows, ("figure", "median", "unit"))
    return figures


def raw_env(game: str, n: int):
    """ale-py's vector env, rlamd's preprocessing and threads, no reward clipping or life loss."""
    from ale_py.vector_env import AtariVectorEnv

    cfg = AtariConfig()
    opts = {"noop_max": cfg.noop_max, "frameskip": cfg.frame_skip, "stack_num": cfg.frame_stack}
    opts |= {"num_threads": env_threads(n), "autoreset_mode": "SameStep"}
    return AtariVectorEnv(game, n, reward_clipping=False, episodic_life=False, **opts)


def stepping(env, actions: list, work: int):
    """A call stepping ``env`` once per action of ``actions``, returning ``work``."""
    each = cycle(actions)
    return repeat(lambda: env.step(next(each)), len(actions), work)


def run_env_suite(steps: int = 400, repeats: int = 5, game: str = "breakout") -> list[Figure]:
    figures, rows = [], []
    for n in (8, 16):
        envs = {"raw_ale": raw_env(game, n), "rlamd": make_env(game, n)}  # the same threads
        rng, contenders = np.random.default_rng(0), []
        actions = [rng.integers(0, 4, n) for _ in range(steps)]
        for who, env in envs.items():
            env.reset(seed=0)
            run = timed(stepping(env, actions, steps * n))
            contenders.append(Contender(f"env/{who}/{n}", "env steps/s", run, {"num_envs": n}))
        raw, ours = interleave(contenders, repeats=repeats)
        r = ratio(ours, raw, "ratio_to_raw")
        figures += [raw, ours]
        rows.append((str(n), f"{raw.median:,.0f}", f"{ours.median:,.0f}", r.text("")))
        for env in envs.values():
            env.close()
    head = (
        f"env: {game}, env steps/s (median of {repeats} interleaved rounds, {steps} vector "
        "steps each; ratio: median per round, min-max)"
    )
    report(head, rows, ("num_envs", "raw AtariVectorEnv", "rlamd make_env", "ratio"))
    return figures
