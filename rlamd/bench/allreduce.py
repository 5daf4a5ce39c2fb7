"""Gradient all-reduce between two learners, like rccl-tests' all_reduce_perf.

Two processes form a torch.distributed group (``nccl`` -- RCCL on ROCm -- when two GPUs
are visible, ``gloo`` otherwise) and all-reduce float32 tensors from 8 B upwards. Reported
per size: time, algorithm bandwidth (size / time) and bus bandwidth (algbw x 2(n-1)/n, the
figure comparable across rank counts).
"""

from __future__ import annotations

import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from .common import Figure, print_table

__all__ = ["run_allreduce_suite"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(
    rank: int, world: int, port: int, backend: str, sizes: list[int], iters: int, out
) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group(backend, rank=rank, world_size=world)
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    results = []
    for nbytes in sizes:
        x = torch.ones(max(1, nbytes // 4), device=device)
        for _ in range(2):
            dist.all_reduce(x)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times = []
        for _ in range(iters):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - t0)
        times.sort()
        results.append((nbytes, times[len(times) // 2]))
    if rank == 0:
        out.put(results)
    dist.destroy_process_group()


def run_allreduce_suite(
    max_bytes: int = 256 * 2**20, iters: int = 10, backend: str | None = None
) -> list[Figure]:
    world = 2
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= 2 else "gloo"
    sizes = []
    n = 8
    while n <= max_bytes:
        sizes.append(n)
        n *= 4
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=_worker, args=(r, world, port, backend, sizes, iters, out))
        for r in range(world)
    ]
    for p in procs:
        p.start()
    results = out.get(timeout=600)
    for p in procs:
        p.join(timeout=60)
    figures, rows = [], []
    for nbytes, t in results:
        algbw = nbytes / t / 1e9
        busbw = algbw * 2 * (world - 1) / world
        figures.append(Figure(f"allreduce/{backend}/{nbytes}B", "GB/s busbw", busbw, busbw, busbw, [busbw],
                              {"bytes": nbytes, "time_us": t * 1e6, "algbw": algbw, "ranks": world}))  # fmt: skip
        rows.append((f"{nbytes:,}", f"{t * 1e6:,.1f}", f"{algbw:.3f}", f"{busbw:.3f}"))
    name = "RCCL/NCCL" if backend == "nccl" else "gloo (CPU)"
    print(f"\nallreduce: {world} ranks, {name}, float32, median of {iters}")
    print_table(rows, ("bytes", "time (us)", "algbw (GB/s)", "busbw (GB/s)"))
    return figures
