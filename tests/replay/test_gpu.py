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


def _twin_samplers(backends, capacity=5000):
    from rlamd.replay import PrioritizedSampler

    out = {}
    for name, (backend, dev) in backends.items():
        s = PrioritizedSampler(capacity, alpha=0.6, device=dev, backend=backend, validate=False)
        first = torch.arange(capacity, device=dev)
        s.activate(first[:0], first)
        out[name] = s
    return out


def test_triton_kernels_equal_the_torch_reference_on_the_gpu():
    pytest.importorskip("triton")
    s = _twin_samplers(
        {"triton": ("triton", "cuda"), "torch": ("torch", "cuda"), "numba": ("numba", "cpu")}
    )
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        idx = torch.randint(0, 5000, (256,), generator=g)
        idx[1:5] = idx[0]
        pr = torch.rand(256, generator=g) * 4
        pr[9] = float("nan")
        retired, activated = torch.randint(0, 5000, (8,), generator=g), torch.arange(8)
        r = torch.rand(256, generator=g)
        draws = {}
        for name, x in s.items():
            dev = x.device
            x.update(idx.to(dev), pr.to(dev))
            x.activate(retired.to(dev), activated.to(dev))
            draws[name] = [t.cpu() for t in x.sample(256, beta=0.4, uniforms=r.to(dev))]
        assert torch.equal(s["triton"].tree.flat.cpu(), s["torch"].tree.flat.cpu())
        assert torch.equal(s["triton"].min_tree.flat.cpu(), s["torch"].min_tree.flat.cpu())
        assert torch.equal(s["triton"].state.cpu(), s["torch"].state.cpu())
        assert torch.equal(draws["triton"][0], draws["torch"][0])
        assert torch.equal(draws["triton"][1], draws["torch"][1])
        # numba's libm may round exp/log differently by an ulp: close, indices equal.
        torch.testing.assert_close(s["triton"].tree.flat.cpu(), s["numba"].tree.flat)
        assert torch.equal(draws["triton"][0], draws["numba"][0])


def test_triton_sample_and_update_replay_in_a_cuda_graph():
    pytest.importorskip("triton")
    s = _twin_samplers({"eager": ("triton", "cuda"), "graph": ("triton", "cuda")})
    u = torch.rand(256, device="cuda")
    beta = torch.tensor(0.4, dtype=torch.float64, device="cuda")
    g = s["graph"]

    def step(x):
        idx, w = x.sample(256, beta=beta, uniforms=u)
        x.update(idx, w * 3 + (idx % 7).float())  # priorities that depend on the draw
        return idx, w

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile the kernels before capturing
        step(s["eager"])
        step(g)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step(g)
    gen = torch.Generator(device="cuda").manual_seed(3)
    for i in range(20):
        u.copy_(torch.rand(256, device="cuda", generator=gen))
        beta.fill_(0.4 + 0.03 * i)
        graph.replay()
        ref = step(s["eager"])
        assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    assert torch.equal(g.tree.flat, s["eager"].tree.flat)
    assert torch.equal(g.min_tree.flat, s["eager"].min_tree.flat)
    assert torch.equal(g.state, s["eager"].state)
