"""The k-ary segment tree against hand-computed values and brute force, both backends."""

from __future__ import annotations

import pytest
import torch

from rlamd.replay import SegmentTree

BACKENDS = ["torch", "numba"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_computed_small_tree(backend):
    tree = SegmentTree(6, arity=2, backend=backend)  # 8 leaves, depth 3
    tree.set(torch.tensor([0, 1, 2, 3, 4, 5]), torch.tensor([1.0, 2.0, 0.0, 4.0, 3.0, 6.0]))
    assert tree.depth == 3
    assert tree.root().item() == 16.0
    assert tree.levels[1].tolist() == [7.0, 9.0]
    assert tree.levels[2].tolist() == [3.0, 4.0, 9.0, 0.0]
    # prefix sums: [0,1) -> 0, [1,3) -> 1, [3,7) -> 3 (leaf 2 is empty), [7,10) -> 4, [10,16) -> 5
    u = torch.tensor([0.0, 0.99, 1.0, 2.99, 3.0, 6.99, 7.0, 9.99, 10.0, 15.99])
    assert tree.find_prefix(u).tolist() == [0, 0, 1, 1, 3, 3, 4, 4, 5, 5]
    mins = SegmentTree(6, "min", arity=2, backend=backend)
    mins.set(torch.tensor([3, 4]), torch.tensor([4.0, 3.0]))
    assert mins.root().item() == 3.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_duplicates_largest_value_wins(backend):
    tree = SegmentTree(100, backend=backend)
    tree.set(torch.tensor([5, 5, 7, 5]), torch.tensor([1.0, 9.0, 2.0, 3.0]))
    assert tree.leaves[5].item() == 9.0 and tree.root().item() == 11.0


@pytest.mark.parametrize("capacity", [1, 31, 32, 33, 5000])
def test_backends_agree_and_match_brute_force(capacity):
    g = torch.Generator().manual_seed(capacity)
    trees = {b: SegmentTree(capacity, backend=b) for b in BACKENDS}
    mins = {b: SegmentTree(capacity, "min", backend=b) for b in BACKENDS}
    ref = torch.zeros(capacity)
    ref_min = torch.full((capacity,), torch.inf)
    for _ in range(3):  # overwrite repeatedly, with duplicates
        idx = torch.randint(0, capacity, (300,), generator=g)
        val = torch.randint(0, 50, (300,), generator=g).float()
        min_val = torch.where(val > 0, val, torch.inf)
        for b in BACKENDS:
            trees[b].set(idx, val)
            mins[b].set(idx, min_val)
        for i in idx.unique().tolist():
            ref[i] = val[idx == i].max()
            ref_min[i] = min_val[idx == i].max()
    assert torch.equal(trees["torch"].flat, trees["numba"].flat)
    assert torch.equal(mins["torch"].flat, mins["numba"].flat)
    assert trees["torch"].root().item() == ref.sum().item()
    assert mins["torch"].root().item() == ref_min.min().item()
    if ref.sum() > 0:
        u = torch.rand(2000, generator=g) * ref.sum()
        expected = torch.searchsorted(torch.cumsum(ref, 0), u, right=True)
        for b in BACKENDS:
            got = trees[b].find_prefix(u)
            assert torch.equal(got, expected)
            assert (ref[got] > 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_rounding_past_the_end_never_picks_an_empty_leaf(backend):
    tree = SegmentTree(64, backend=backend)
    tree.set(torch.tensor([3, 10]), torch.tensor([0.1, 0.2]))
    got = tree.find_prefix(torch.tensor([tree.root().item() * 1.0001, 1e9]))
    assert got.tolist() == [10, 10]


def test_state_dict_round_trip_rebuilds_inner_nodes():
    a = SegmentTree(1000, backend="torch")
    a.set(torch.arange(1000), torch.rand(1000))
    b = SegmentTree(1000, backend="numba")
    b.load_state_dict(a.state_dict())
    assert torch.allclose(a.flat, b.flat)
    with pytest.raises(ValueError, match="leaves"):
        SegmentTree(999).load_state_dict(a.state_dict())


def test_bad_arguments():
    with pytest.raises(ValueError, match="capacity=0"):
        SegmentTree(0)
    with pytest.raises(ValueError, match="op='max'"):
        SegmentTree(4, "max")
    with pytest.raises(ValueError, match="backend='cuda'"):
        SegmentTree(4, backend="cuda")


def test_loading_a_trees_own_state_back_keeps_it():
    """Regression: on the CPU state_dict's leaves are a view of the tree itself, and
    load_state_dict's fill wiped them before writing them back (an empty tree, whose
    descent returned a padding leaf past the capacity)."""
    tree = SegmentTree(100, backend="numba")
    tree.set(torch.arange(100), torch.rand(100, generator=torch.Generator().manual_seed(0)))
    before = tree.flat.clone()
    tree.load_state_dict(tree.state_dict())
    assert torch.equal(tree.flat, before)
