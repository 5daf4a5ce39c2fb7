"""The Triton backend, checked on the CPU in Triton's interpreter (CI has no GPU), and
the fallback to torch where Triton is missing."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlamd.replay import segment_tree

CASES = Path(__file__).with_name("triton_cases.py")
needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="triton not installed"
)


def _run_cases(selection: str) -> None:
    # TRITON_INTERPRET is read when triton is imported: a fresh interpreter, not this one.
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(CASES),
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-k",
        selection,
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@needs_triton
def test_triton_prioritized_kernels_equal_the_torch_reference():
    _run_cases("test_prioritized_draws_and_trees_equal_the_reference and 40")


@needs_triton
@pytest.mark.slow
def test_triton_kernels_all_cases():
    _run_cases("test_")


def test_missing_triton_falls_back_to_torch_with_one_log_line(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    monkeypatch.delitem(sys.modules, "rlamd.replay.triton_trees", raising=False)
    monkeypatch.delattr("rlamd.replay.triton_trees", raising=False)
    segment_tree._triton_import_error.cache_clear()
    segment_tree._warn_no_triton.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger=segment_tree.__name__):
            gpu = torch.device("cuda")
            assert segment_tree.resolve_backend("auto", gpu) == "torch"
            assert segment_tree.resolve_backend("auto", gpu) == "torch"
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and lines[0].startswith("Triton cannot serve the replay trees (")
        with pytest.raises(ValueError, match="backend='triton' but Triton cannot run on cuda"):
            segment_tree.resolve_backend("triton", gpu)
    finally:
        segment_tree._triton_import_error.cache_clear()
        segment_tree._warn_no_triton.cache_clear()


def test_a_gpu_triton_cannot_compile_for_falls_back_to_torch_with_the_reason(monkeypatch, caplog):
    """Triton 3.9 imports on an RX 6800 XT but rejects its gfx1030: `auto` must not pick it."""
    why = "Triton 3.9.0 on gfx1030: RuntimeError: PassManager::run failed"
    monkeypatch.setattr(segment_tree, "_triton_import_error", lambda: None)
    monkeypatch.setattr(segment_tree, "_triton_device_error", lambda device: why)
    segment_tree._warn_no_triton.cache_clear()
    gpu = torch.device("cuda", 0)
    try:
        with caplog.at_level(logging.WARNING, logger=segment_tree.__name__):
            assert segment_tree.resolve_backend("auto", gpu) == "torch"
            assert segment_tree.resolve_backend("auto", gpu) == "torch"
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and why in lines[0]
        with pytest.raises(ValueError, match="cannot run on cuda:0 .*gfx1030.*accepted: 'torch'"):
            segment_tree.resolve_backend("triton", gpu)
    finally:
        segment_tree._warn_no_triton.cache_clear()


@needs_triton
def test_the_device_probe_reports_a_failed_launch_with_the_triton_version():
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("the interpreter is on in this process")
    import triton

    # A CPU tensor without the interpreter cannot launch: the probe explains, never raises.
    why = segment_tree._triton_device_error.__wrapped__(torch.device("cpu"))
    assert why.startswith(f"Triton {triton.__version__} on cpu: ValueError")
    assert "TRITON_INTERPRET=1" in why


def test_backend_names_and_the_environment_override(monkeypatch):
    cpu = torch.device("cpu")
    with pytest.raises(ValueError, match=r"backend='trition'.*did you mean 'triton'"):
        segment_tree.resolve_backend("trition", cpu)
    monkeypatch.setenv("RLAMD_TREE_BACKEND", "torch")
    assert segment_tree.SegmentTree(10).backend == "torch"
    monkeypatch.delenv("RLAMD_TREE_BACKEND")
    assert segment_tree.SegmentTree(10).backend == "numba"


@needs_triton
def test_triton_on_cpu_tensors_without_the_interpreter_is_refused():
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("the interpreter is on in this process")
    tree = segment_tree.SegmentTree(10, backend="triton")
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        tree.set(torch.tensor([1]), torch.tensor([1.0]))


@needs_triton
def test_the_variable_asking_for_triton_on_a_cpu_is_refused_before_training(monkeypatch):
    """Regression: RLAMD_TREE_BACKEND=triton on a CPU ended in a traceback at the first
    priority write, mid-run; it is refused when the tree is built, naming the variable."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("the interpreter is on in this process")
    monkeypatch.setenv("RLAMD_TREE_BACKEND", "triton")
    with pytest.raises(ValueError, match="RLAMD_TREE_BACKEND='triton' but Triton cannot run"):
        segment_tree.SegmentTree(10)


@needs_triton
def test_a_kernel_out_of_resources_falls_back_to_torch_with_one_line_the_doctor_explains(
    monkeypatch, caplog
):
    """The probe runs the largest launch of each kernel; an OutOfResources there (an LDS,
    register or thread limit) names the kernel, and `auto` takes the torch trees."""
    from triton.runtime.errors import OutOfResources

    from rlamd.doctor import explain
    from rlamd.replay import triton_trees

    def too_big(*args, **kwargs):
        raise OutOfResources(98304, 65536, "shared memory")

    # The rebuild passes (done with torch ops here: no GPU); the fused write does not fit.
    monkeypatch.setattr(
        triton_trees,
        "rebuild",
        lambda t: t.load_state_dict({"leaves": t.leaves[: t.capacity].clone()}),
    )
    monkeypatch.setattr(triton_trees, "write", too_big)
    why = segment_tree._triton_device_error.__wrapped__(torch.device("cpu"))
    assert why.startswith("rlamd replay: Triton kernel _write_kernel is out of resources on cpu")
    assert "Required: 98304, Hardware limit: 65536" in why and "torch ops from now on" in why
    monkeypatch.setattr(segment_tree, "_triton_import_error", lambda: None)
    monkeypatch.setattr(segment_tree, "_triton_device_error", lambda device: why)
    segment_tree._warn_no_triton.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger=segment_tree.__name__):
            for _ in range(2):
                assert segment_tree.resolve_backend("auto", torch.device("cuda", 0)) == "torch"
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and why in lines[0]
        assert explain(lines[0])[0].key == "rlamd_triton_out_of_resources"
    finally:
        segment_tree._warn_no_triton.cache_clear()


@needs_triton
def test_launch_sizes_per_target():
    from rlamd.replay import triton_trees as tt

    cdna, rdna, sm = (
        tt.target_of("gfx942:sramecc+:xnack-"),
        tt.target_of("gfx1100"),
        tt.target_of("sm_90"),
    )
    assert (cdna.wavefront, cdna.lds_bytes, cdna.max_vgprs) == (64, 65536, 512)
    assert (rdna.wavefront, rdna.lds_bytes, rdna.max_vgprs) == (32, 65536, 256)
    assert (
        tt.target_of("gfx950").lds_bytes == 160 * 1024 and tt.target_of("gfx908").max_vgprs == 256
    )
    # About 256 threads per write or rebuild program, whatever the wavefront; one stage on AMD.
    for t in (cdna, rdna, sm):
        opts = tt.launch_options("write", t)
        assert opts["num_warps"] * t.wavefront == 256
        assert opts.get("num_stages") == (1 if t.amd else None)
        # The draw's tile layout (and so its prefix-sum order) is the same everywhere.
        assert tt.launch_options("sample", t)["num_warps"] == 4
