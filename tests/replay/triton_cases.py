"""Triton kernels against the torch reference, in Triton's CPU interpreter.

Not collected by default (no ``test_`` prefix): ``test_triton.py`` runs this file in a
subprocess with ``TRITON_INTERPRET=1``, which Triton reads when it is first imported.
"""

from __future__ import annotations

import os

import pytest
import torch

from rlamd.replay import PrioritizedSampler, SegmentTree, UniformSampler

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1 at start-up"
)
BACKENDS = ("torch", "numba", "triton")


def _assert_same(samplers):
    ref = samplers["torch"]
    for name, s in samplers.items():
        assert torch.equal(s.tree.flat, ref.tree.flat), name
        if ref.min_tree is not None:
            assert torch.equal(s.min_tree.flat, ref.min_tree.flat), name
        assert torch.equal(s.state, ref.state), name


@pytest.mark.parametrize("capacity", [40, 1500])
def test_prioritized_draws_and_trees_equal_the_reference(capacity):
    g = torch.Generator().manual_seed(capacity)
    s = {b: PrioritizedSampler(capacity, alpha=0.7, backend=b, validate=False) for b in BACKENDS}
    first = torch.arange(capacity)
    for x in s.values():
        x.activate(first[:0], first)
    for step in range(3):
        idx = torch.randint(0, capacity, (48,), generator=g)
        idx[1:4] = idx[0]  # duplicates: the largest priority wins
        pr = torch.rand(48, generator=g) * 4
        pr[5], pr[6], pr[7] = float("nan"), -1.0, float("inf")  # dropped and counted
        retired = torch.randint(0, capacity, (9,), generator=g)
        activated = torch.randint(0, capacity, (4,), generator=g)
        r = torch.rand(32, generator=g)
        beta = 0.3 + 0.2 * step
        draws = {}
        for b, x in s.items():
            x.update(idx, pr)
            x.activate(retired, activated)
            draws[b] = x.sample(32, beta=beta if step else torch.tensor(beta), uniforms=r)
        _assert_same(s)
        for b, (i, w) in draws.items():
            assert torch.equal(i, draws["torch"][0]), b
            assert torch.equal(w, draws["torch"][1]), b
            assert (s["torch"].tree.leaves[i] > 0).all()
    assert s["triton"].rejected.item() == 9
    # A record retired after it was drawn stays retired when its priority comes back.
    i, _ = s["triton"].sample(8, uniforms=torch.rand(8, generator=g))
    for x in s.values():
        x.activate(i, i[:0])
        x.update(i, torch.full((8,), 3.0))
    _assert_same(s)
    assert (s["triton"].tree.leaves[i] == 0).all()


def test_uniform_sampler_and_bulk_writes_equal_the_reference(monkeypatch):
    from rlamd.replay import triton_trees

    monkeypatch.setattr(triton_trees, "MAX_FUSED", 64)  # take the per-level rebuild path
    g = torch.Generator().manual_seed(0)
    s = {b: UniformSampler(3000, backend=b) for b in BACKENDS}
    r = torch.rand(16, generator=g)
    for x in s.values():
        x.activate(torch.arange(0), torch.arange(2500))  # bulk
        x.activate(torch.arange(10, 30), torch.arange(2990, 3000))  # fused
    _assert_same(s)
    draws = {b: x.sample(16, uniforms=r)[0] for b, x in s.items()}
    assert all(torch.equal(d, draws["torch"]) for d in draws.values())
    trees = {b: SegmentTree(3000, "min", backend=b) for b in BACKENDS}
    for t in trees.values():
        t.load_state_dict({"leaves": torch.rand(3000, generator=torch.Generator().manual_seed(1))})
        t.set(torch.tensor([7, 7, 9]), torch.tensor([0.5, 2.0, 0.25]))
    assert all(torch.equal(t.flat, trees["torch"].flat) for t in trees.values())
    assert trees["triton"].leaves[7].item() == 2.0


def test_the_device_probe_passes_where_the_kernels_run():
    from rlamd.replay import segment_tree

    assert segment_tree._triton_device_error.__wrapped__(torch.device("cpu")) is None
