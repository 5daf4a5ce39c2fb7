"""The replay's Triton kernels compile for the GPUs rlamd serves, without one at hand.

Triton's CPU interpreter (``test_triton.py``) checks what the kernels compute, but it
accepts code that the GPU compilers reject. Here every launch the samplers really make is
recorded (arguments, constexprs, warps) and compiled ahead of time, as the GPU would
compile it, for NVIDIA (sm_80, sm_90) and AMD (gfx90a MI250, gfx942 MI300, gfx950 MI355,
gfx1100 RX 7900, gfx1201 RX 9070) targets, with the launch sizes rlamd picks for each
(``triton_trees.launch_options``), and what each kernel needs (threads, LDS, VGPRs, SGPRs,
scratch) is checked against that target's limits. RDNA2 (gfx1030, RX 6000) is not among them:
Triton does not compile for it, and the trees fall back to torch there
(``segment_tree.triton_unusable``). Triton ships ``ptxas`` and the AMD linker in its wheel, so no GPU or
driver is needed.
"""

from __future__ import annotations

import functools
import importlib.util
import re

import pytest
import torch

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="triton not installed"
)

_TYPES = {
    torch.float32: "fp32",
    torch.float64: "fp64",
    torch.int64: "i64",
    torch.int32: "i32",
}
_SLOW = [("cuda", 80, 32), ("cuda", 90, 32), ("hip", "gfx90a", 64), ("hip", "gfx1100", 32)]
_SLOW += [("hip", "gfx950", 64), ("hip", "gfx1201", 32)]
# MI300 in the default run (~10 s); A100, H100/H200, MI250, RX 7900, MI355, RX 9070: slow.
TARGETS = [("hip", "gfx942", 64)] + [pytest.param(t, marks=pytest.mark.slow) for t in _SLOW]


class _Recorder:
    """Stands in for a jitted kernel: ``kern[grid](*args, **kwargs)`` records the launch."""

    def __init__(self, jitted, launches: list) -> None:
        self.jitted, self.launches = jitted, launches

    def __getitem__(self, grid):
        return functools.partial(self._record, grid)

    def _record(self, grid, *args, **kwargs) -> None:
        self.launches.append((self.jitted, args, kwargs))


def _signature(jitted, args, kwargs) -> tuple[dict, dict, dict]:
    """Triton's ahead-of-time signature of one recorded launch."""
    names = [p.name for p in jitted.params]
    sig, consts = {}, {}
    for name, value in zip(names, args, strict=False):
        if isinstance(value, torch.Tensor):
            sig[name] = "*" + _TYPES[value.dtype]
        else:
            sig[name] = "i64" if abs(int(value)) >= 2**31 else "i32"
    # num_warps / num_stages are chosen per target when compiling (launch_options).
    options = {k: kwargs[k] for k in ("enable_fp_fusion",) if k in kwargs}
    for name in names[len(args) :]:
        sig[name] = "constexpr"
        consts[name] = kwargs[name]
    return sig, consts, options


@functools.cache
def _recorded_launches() -> tuple:
    """Every distinct launch of a prioritized and a uniform sampler at 2^20 records, and a
    min tree's bulk load: sample (with and without weights), priority update, activate
    (fused and bulk), set, rebuild."""
    from rlamd.replay import PrioritizedSampler, SegmentTree, UniformSampler, triton_trees

    launches: list = []
    jitted = triton_trees._pick(torch.empty(1, device="meta"))
    fakes = tuple(_Recorder(j, launches) for j in jitted)
    original = triton_trees._pick
    triton_trees._pick = lambda t: fakes
    try:
        n = 2**20
        p = PrioritizedSampler(n, alpha=0.6, backend="triton", validate=False)
        p.activate(torch.arange(0), torch.arange(n))  # bulk: a launch per level
        p.activate(torch.arange(8), torch.arange(8, 16))  # fused
        p.update(torch.arange(256), torch.rand(256))
        p.sample(256, beta=0.4)
        u = UniformSampler(n, backend="triton")
        u.activate(torch.arange(4), torch.arange(4, 12))
        u.sample(128)
        SegmentTree(n, "min", backend="triton").set(torch.tensor([3]), torch.tensor([0.5]))
    finally:
        triton_trees._pick = original
    seen, unique = set(), []
    for jitted, args, kwargs in launches:
        sig, consts, options = _signature(jitted, args, kwargs)
        key = (jitted.fn.__name__, repr(sig), repr(consts), repr(options))
        if key not in seen:
            seen.add(key)
            unique.append((jitted, sig, consts, options))
    return tuple(unique)


def test_the_recorded_launches_cover_every_kernel_and_write_mode():
    from rlamd.replay import triton_trees

    launches = _recorded_launches()
    names = {j.fn.__name__ for j, *_ in launches}
    assert names == {"_sample_kernel", "_write_kernel", "_rebuild_kernel"}
    modes = {c["MODE"] for j, _, c, _ in launches if "MODE" in c}
    assert modes == {triton_trees.SET, triton_trees.PRIORITY, triton_trees.ACTIVATE}
    assert {c["WEIGHTS"] for j, _, c, _ in launches if "WEIGHTS" in c} == {True, False}
    # No fused multiply-adds: the GPU must round as the torch reference does.
    assert all(o.get("enable_fp_fusion") is False for *_, o in launches)


_KIND = {"_sample_kernel": "sample", "_write_kernel": "write", "_rebuild_kernel": "rebuild"}


def _compile_within_limits(target, jitted, sig, consts, options) -> dict:
    """Compile one launch for ``target`` with the sizes rlamd picks for it, and check what
    it needs against the target's limits: threads, LDS, and on AMD VGPRs, SGPRs and no
    spills. Returns the resources (for the failure message)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from rlamd.replay import triton_trees as tt

    limits = tt.target_of(target[1] if target[0] == "hip" else f"sm_{target[1]}")
    assert limits.wavefront == target[2]
    opts = {**options, **tt.launch_options(_KIND[jitted.fn.__name__], limits)}
    src = ASTSource(fn=jitted, signature=sig, constexprs=consts)
    done = triton.compile(src, target=GPUTarget(*target), options=opts)
    need = {"threads": opts["num_warps"] * limits.wavefront, "lds": done.metadata.shared}
    what = (jitted.fn.__name__, consts.get("BLOCK"), consts.get("MODE"), need)
    assert need["threads"] <= limits.max_threads, what
    if limits.lds_bytes is not None:
        assert need["lds"] <= limits.lds_bytes, what
    if target[0] == "hip":
        asm = done.asm["amdgcn"]
        for key in ("vgpr_count", "agpr_count", "sgpr_count", "private_segment_fixed_size"):
            found = re.search(rf"\.{key}:\s+(\d+)", asm)
            need[key] = int(found.group(1)) if found else 0
        registers = need["vgpr_count"] + need["agpr_count"]  # one file from gfx90a on
        assert registers <= limits.max_vgprs, what
        assert need["sgpr_count"] <= (102 if limits.arch.startswith("gfx9") else 106), what
        assert need["private_segment_fixed_size"] == 0, what  # no register spills to scratch
    else:
        assert len(done.asm["cubin"]) > 0, what
    return need


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t[0]}-{t[1]}")
def test_every_replay_kernel_compiles_for_the_gpu_within_its_limits(target):
    for launch in _recorded_launches():
        _compile_within_limits(target, *launch)


_AMD = [t for t in [("hip", "gfx942", 64), *_SLOW] if t[0] == "hip"]


@pytest.mark.slow
@pytest.mark.parametrize("target", _AMD, ids=lambda t: f"{t[0]}-{t[1]}")
def test_the_largest_fused_write_fits_every_amd_target(target):
    """A fused write of MAX_FUSED indices (the most one program takes; larger writes go
    through the per-level rebuild) in each write mode: about 40 s a target on 2 cores."""
    from rlamd.replay import triton_trees as tt

    modes = {}
    for jitted, sig, consts, options in _recorded_launches():
        if jitted.fn.__name__ == "_write_kernel":
            modes.setdefault(
                consts["MODE"], (jitted, sig, {**consts, "BLOCK": tt.MAX_FUSED}, options)
            )
    assert set(modes) == {tt.SET, tt.PRIORITY, tt.ACTIVATE}
    for launch in modes.values():
        _compile_within_limits(target, *launch)
