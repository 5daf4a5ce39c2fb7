"""Replay on a GPU equals the CPU's, and samples/updates without a host sync."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlamd.replay import PrioritizedReplayBuffer

from .helpers import CountingEnv

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU"),
]


def _twin_buffers():
    bufs = [
        PrioritizedReplayBuffer(
            3 * 64, 3, (2,), n_step=3, device=dev, backend="torch", validate=False
        )
        for dev in ("cpu", "cuda")
    ]
    env = CountingEnv(3, seed=0)
    for _ in range(150):
        obs, a, r, term, _trunc, done, final, _ = env.step()
        for b in bufs:
            b.add(obs, a, r, term, done, final)
    return bufs


def test_gpu_results_equal_cpu():
    cpu, gpu = _twin_buffers()
    assert len(cpu) == len(gpu)
    idx = torch.from_numpy(cpu.storage.active_indices())
    pr = torch.rand(idx.numel(), generator=torch.Generator().manual_seed(0)) * 4
    cpu.update_priorities(idx, pr)
    gpu.update_priorities(idx.cuda(), pr.cuda())
    torch.testing.assert_close(gpu.sampler.tree.flat.cpu(), cpu.sampler.tree.flat)
    torch.testing.assert_close(gpu.sampler.min_tree.flat.cpu(), cpu.sampler.min_tree.flat)
    u = torch.rand(512, generator=torch.Generator().manual_seed(1)) * cpu.sampler.tree.root()
    assert torch.equal(
        gpu.sampler.tree.find_prefix(u.cuda()).cpu(), cpu.sampler.tree.find_prefix(u)
    )
    wc, wg = cpu.storage.window(idx), gpu.storage.window(idx.cuda())
    torch.testing.assert_close(wg.returns.cpu(), wc.returns)
    torch.testing.assert_close(wg.discounts.cpu(), wc.discounts)
    assert torch.equal(wg.next_index.cpu(), wc.next_index)
    assert torch.equal(gpu.storage.stacks(idx.cuda()).cpu(), cpu.storage.stacks(idx))


def test_sample_and_update_never_sync_the_host():
    buf = PrioritizedReplayBuffer(
        8 * 512, 8, (4, 84, 84), torch.uint8, frame_stack=4, n_step=3, device="cuda"
    )
    rng = np.random.default_rng(0)
    z = np.zeros(8, dtype=bool)
    for _ in range(300):
        buf.add(rng.integers(0, 255, (8, 4, 84, 84), dtype=np.uint8), np.zeros(8), np.ones(8), z, z)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(10):
            batch = buf.sample(128, beta=0.4)
            buf.update_priorities(batch.indices, batch.returns.abs() + 0.1)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert batch.obs.is_cuda and batch.obs.dtype == torch.uint8
