"""The doctor's known-errors table: --explain for every row, and the fixes it prints."""

from __future__ import annotations

import json
import re

import pytest

from rlamd.doctor import KNOWN_ERRORS, explain
from rlamd.doctor.__main__ import main
from rlamd.doctor.gfx import FAMILY_OVERRIDES, OVERRIDE_RULE, gfx_for_override, override_for
from rlamd.doctor.install import TORCH_PIN

SAMPLES = {
    "no_binary_for_gpu": (
        "RuntimeError: HIP error: hipErrorNoBinaryForGpu: Unable to find code object for all "
        "current devices!"
    ),
    "out_of_memory": "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 7.03 GiB",
    "hsa_out_of_resources": (
        "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources."
    ),
    "collective_timeout": (
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
        "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out."
    ),
    "no_hip_gpus": "RuntimeError: No HIP GPUs are available",
    "cuda_not_available": "torch.cuda.is_available() returns False on my RX 7900",
    "invalid_ordinal": "RuntimeError: HIP error: invalid device ordinal",
    "kfd_permission": "Unable to open /dev/kfd read-write: Permission denied",
    "missing_libs": (
        "OSError: libamdhip64.so.6: cannot open shared object file: No such file or directory"
    ),
    "memory_access_fault": (
        "Memory access fault by GPU node-1 (Agent handle: 0x55d1) on address 0x7f. Reason: Page "
        "not present or supervisor privilege."
    ),
    "hip_version_mismatch": (
        "hipErrorInsufficientDriver: driver version is insufficient for runtime version"
    ),
}


def test_every_table_row_has_a_sample():
    assert set(SAMPLES) == {e.key for e in KNOWN_ERRORS}


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_explain_matches_each_row(key, capsys):
    keys = [e.key for e in explain(SAMPLES[key])]
    assert keys[0] == key
    assert main(["--explain", SAMPLES[key], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["matches"][0]["key"] == key and out["matches"][0]["fixes"]


def test_explain_unknown_message(capsys):
    assert main(["--explain", "my cat sat on the keyboard"]) == 1
    assert "No known error matches" in capsys.readouterr().out


# ---------------------------------------------------------------- install commands and overrides


def test_no_binary_for_gpu_gives_the_pinned_rocm_command(capsys):
    assert main(["--explain", SAMPLES["no_binary_for_gpu"]]) == 0
    out = capsys.readouterr().out
    assert (
        f"pip install torch=={TORCH_PIN} --index-url https://download.pytorch.org/whl/rocm" in out
    )
    assert "RLAMD_TORCH=rocm bash scripts/setup.sh" in out


def test_no_hip_gpus_names_the_override_and_the_gfx_mapping(capsys):
    assert main(["--explain", "RuntimeError: No HIP GPUs are available"]) == 0
    out = capsys.readouterr().out
    fixes = out.split("fixes:")[1]
    first_fix = fixes.strip().splitlines()[0]
    assert "HSA_OVERRIDE_GFX_VERSION" in first_fix  # the first fix the ROCm guides give
    for text in (
        "gfx1031",
        "gfx1101",
        "gfx103x",
        "gfx110x",
        "HSA_OVERRIDE_GFX_VERSION=10.3.0",
        "HSA_OVERRIDE_GFX_VERSION=11.0.0",
        "unofficial",
    ):
        assert text in first_fix, text


def test_the_override_rule_agrees_with_the_table():
    """Each gfx name the printed rule mentions gets the version the doctor's table gives it."""
    for family in OVERRIDE_RULE.split(";"):
        version = re.search(r"HSA_OVERRIDE_GFX_VERSION=([\d.]+)", family).group(1)
        names = re.findall(r"gfx1[0-9a-f]{3}\b", family)
        assert names
        assert all(FAMILY_OVERRIDES[n] == version for n in names), (names, version)
        assert gfx_for_override(version) not in names  # the family's listed card needs none
    assert override_for("gfx1031:xnack-") == "10.3.0" and override_for("GFX1101") == "11.0.0"
    assert override_for("gfx1030") is None and override_for("gfx942") is None


@pytest.mark.parametrize(
    ("value", "gfx"),
    [("10.3.0", "gfx1030"), ("11.0.0", "gfx1100"), ("9.0.10", "gfx90a"), ("x", None)],
)
def test_gfx_for_override(value, gfx):
    assert gfx_for_override(value) == gfx


# ---------------------------------------------------------------- RCCL timeouts

RCCL_SAMPLES = [
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version "
    "2.21.5 ncclRemoteError: Timeout",
    "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1686694) ran for 300000 milliseconds",
    "node2:1234:1300 [0] NCCL WARN Net : Connect to 10.0.0.1<41235> failed : No route to host",
    "torch.distributed.DistStoreError: Timed out after 301 seconds waiting for clients. 1/2 "
    "clients joined.",
    "RCCL timed out waiting for peers",
]


@pytest.mark.parametrize("message", RCCL_SAMPLES)
def test_rccl_errors_are_explained_with_the_fixes(message, capsys):
    assert "collective_timeout" in [e.key for e in explain(message)]
    assert main(["--explain", message]) == 0
    out = capsys.readouterr().out
    for text in ("NCCL_SOCKET_IFNAME=", "NCCL_DEBUG=INFO", "firewall", "ray.group_timeout_s"):
        assert text in out, text


def test_rccl_row_does_not_claim_unrelated_errors():
    for key in ("out_of_memory", "no_hip_gpus", "invalid_ordinal", "kfd_permission"):
        assert "collective_timeout" not in [e.key for e in explain(SAMPLES[key])]
