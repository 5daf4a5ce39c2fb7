"""Gradient synchronisation between learners over a torch.distributed process group.

``nccl`` is NCCL on CUDA builds and RCCL on ROCm builds of PyTorch; ``gloo`` serves
CPU learners. Everything here runs on the learner's device; nothing reads a value back
to the host except where a caller asks for one.
"""

from __future__ import annotations

import pickle
import socket
from datetime import timedelta

import torch
import torch.distributed as dist

__all__ = ["GradSync", "backend_for", "free_port", "init_group", "run_group", "time_allreduce"]


def backend_for(device: torch.device) -> str:
    """``nccl`` (RCCL on ROCm) for GPU learners, ``gloo`` for CPU ones."""
    return "nccl" if device.type == "cuda" else "gloo"


def free_port(host: str = "") -> int:
    """A TCP port free on this node right now (for rank 0's rendezvous)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def init_group(
    address: str,
    port: int,
    rank: int,
    world_size: int,
    device: torch.device,
    timeout_s: float = 300.0,
) -> GradSync:
    """Join the learners' process group (rank 0 listens on ``address:port``)."""
    backend = backend_for(device)
    kwargs = {"device_id": device} if backend == "nccl" else {}
    dist.init_process_group(
        backend,
        init_method=f"tcp://{address}:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
        **kwargs,
    )
    return GradSync()


class GradSync:
    """Averages gradients, and the few batch statistics a loss needs, over all learners.

    Each learner computes its loss on its own share of the batch; after backward the
    gradients are averaged in one flat all-reduce (together with the loss, so a
    non-finite loss anywhere is seen everywhere), and every learner then clips, skips
    or applies the same update. With equal shares this is the gradient of the whole
    batch's mean loss.
    """

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.group = group
        self.world_size = dist.get_world_size(group)

    def grads(self, grads: list[torch.Tensor], loss: torch.Tensor) -> torch.Tensor:
        """Average ``grads`` in place; returns the mean loss over learners."""
        flat = torch.cat([g.reshape(-1).float() for g in grads] + [loss.reshape(1).float()])
        dist.all_reduce(flat, group=self.group)
        flat /= self.world_size
        parts = flat[:-1].split([g.numel() for g in grads])
        torch._foreach_copy_(grads, [p.view_as(g) for p, g in zip(parts, grads, strict=True)])
        return flat[-1]

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """Mean of ``x`` over learners (a new tensor)."""
        y = x.detach().clone()
        dist.all_reduce(y, group=self.group)
        return y / self.world_size

    def max(self, x: torch.Tensor) -> torch.Tensor:
        """Elementwise maximum of ``x`` over learners (a new tensor)."""
        y = x.detach().clone()
        dist.all_reduce(y, op=dist.ReduceOp.MAX, group=self.group)
        return y


def _group_member(rank: int, world: int, port: int, fn, args: tuple, out) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        # Plain pickle: torch's multiprocessing reducers would share tensors through
        # files that vanish when this process exits.
        out.put((rank, pickle.dumps(fn(rank, world, *args))))
    finally:
        dist.destroy_process_group()


def run_group(fn, world_size: int, *args, timeout_s: float = 600.0) -> list:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes that form a
    gloo process group on this machine; returns their results by rank.

    For the tests and the benchmark when Ray is not installed (``fn`` must be importable
    by name, as ``multiprocessing``'s spawn requires).
    """
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port("127.0.0.1")
    procs = [
        ctx.Process(target=_group_member, args=(r, world_size, port, fn, args, out))
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    try:
        results = {
            rank: pickle.loads(blob) for rank, blob in (out.get(timeout=timeout_s) for _ in procs)
        }
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    return [results[r] for r in range(world_size)]


def time_allreduce(
    device: torch.device, sizes: list[int], iters: int
) -> list[tuple[int, list[float]]]:
    """Seconds of each of ``iters`` float32 all-reduces per size in bytes, on the default
    group (what ``rccl-tests``' ``all_reduce_perf`` times; both ranks call it together)."""
    import time

    out = []
    for nbytes in sizes:
        x = torch.ones(max(1, nbytes // 4), device=device)
        for _ in range(2):
            dist.all_reduce(x)
        times = []
        for _ in range(iters):
            dist.barrier()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            dist.all_reduce(x)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - t0)
        out.append((nbytes, times))
    return out
