"""Gradient all-reduce between two learners, like rccl-tests' ``all_reduce_perf``.

Two rlamd Ray learner actors form their group as ``--ray --num-learners 2`` does (``nccl``,
RCCL on ROCm, when each gets a GPU; ``gloo`` on CPUs); without Ray two local processes form
a gloo group. Per float32 size from 8 B, doubling: time, algbw (size / time) and busbw
(algbw x 2(n-1)/n). For scale: the Nature-CNN DQN's gradients are 6.7 MB per update.
"""

from __future__ import annotations

import statistics

import torch

from .common import Figure, report

__all__ = ["run_allreduce_suite"]


def _member(rank: int, world: int, sizes: list[int], iters: int):
    from rlamd.distributed.sync import time_allreduce

    return time_allreduce(torch.device("cpu"), sizes, iters)


def _between_ray_learners(ray, sizes: list[int], iters: int) -> tuple[list, str]:
    from rlamd.config.sections import RunConfig
    from rlamd.distributed.driver import _RayLearner

    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 2 else 0.0
    train = {"env": "cartpole", "device": "auto" if gpus else "cpu"}
    sections = RunConfig.from_dict({"train": train})
    spec, options = "cuda" if gpus else "cpu", {"num_cpus": 1, "num_gpus": gpus}
    learners = [_RayLearner.options(**options).remote(sections, r, 2, spec, 2) for r in range(2)]
    try:
        addr, port = ray.get(learners[0].rendezvous.remote())
        devices = ray.get([ln.join.remote(addr, port) for ln in learners])
        results = ray.get([ln.allreduce_times.remote(sizes, iters) for ln in learners])[0]
    finally:
        for ln in learners:
            ray.kill(ln)
        if started:
            ray.shutdown()
    return results, "nccl" if devices[0].startswith("cuda") else "gloo"


def run_allreduce_suite(max_bytes: int = 256 * 2**20, iters: int = 10, notes: list | None = None):
    """Figures per message size: bus bandwidth of a 2-rank float32 all-reduce (GB/s)."""
    world, sizes = 2, [8 << i for i in range(max(0, (max_bytes // 8).bit_length()))]
    try:
        import ray
    except ImportError:
        ray = None
    where = "two Ray learner actors" if ray is not None else "two processes"
    if ray is not None:
        results, backend = _between_ray_learners(ray, sizes, iters)
    else:
        from rlamd.distributed.sync import run_group

        if notes is not None:
            notes.append(
                "allreduce: Ray not installed, measured between two local processes "
                "(gloo) instead of two Ray learners"
            )
        results, backend = run_group(_member, world, sizes, iters)[0], "gloo"
    figures, rows, factor = [], [], 2 * (world - 1) / world
    for nbytes, times in results:
        t = statistics.median(times)
        algbw = nbytes / t / 1e9
        busbw = [nbytes / x / 1e9 * factor for x in times]
        meta = {"bytes": nbytes, "time_us": t * 1e6, "algbw": algbw}
        meta |= {"ranks": world, "between": where}
        figures.append(Figure.of(f"allreduce/{backend}/{nbytes}B", "GB/s busbw", busbw, **meta))
        rows.append((f"{nbytes:,}", f"{t * 1e6:,.1f}", f"{algbw:.3g}", f"{algbw * factor:.3g}"))
    name = "RCCL/NCCL" if backend == "nccl" else "gloo (CPU)"
    head = f"allreduce: {world} ranks ({where}), {name}, float32, median of {iters}"
    report(head, rows, ("bytes", "time (us)", "algbw (GB/s)", "busbw (GB/s)"))
    return figures
