"""The doctor's known-errors table: --explain for every row, and the fixes it prints."""

from __future__ import annotations

import json
import re

import pytest

from rlamd.doctor import KNOWN_ERRORS, explain
from rlamd.doctor.__main__ import main
from rlamd.doctor.gfx import FAMILY_OVERRIDES, OVERRIDE_RULE, gfx_for_override, override_for
from rlamd.doctor.install import TORCH_PIN
from rlamd.doctor.known_errors import explain_log

from .known_error_messages import MESSAGES

SAMPLES = {key: found[0][1] for key, found in MESSAGES.items()}
"""One real message per row (tests/known_error_messages.py, copied from public issues)."""
CASES = [(key, url, text) for key, found in MESSAGES.items() for url, text in found]


def test_every_message_of_the_first_set_names_a_row_or_a_code_that_exists():
    """The first set (tests/known_error_messages.py) is kept as it was measured: each
    message names the curated row, or the documented code, that must answer it first."""
    keys = {e.key for e in KNOWN_ERRORS}
    assert all(k in keys or ":" in k for k in MESSAGES)
    for key, found in MESSAGES.items():
        assert all(u.startswith("https://github.com/") for u, _ in found)
        if key in keys:
            row = next(e for e in KNOWN_ERRORS if e.key == key)
            assert row.source in {u for u, _ in found} | {s.url for s in row.seen}


@pytest.mark.parametrize(
    ("key", "url", "text"), CASES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(CASES)]
)
def test_each_real_message_gets_its_diagnosis_first(key, url, text, capsys):
    keys = [e.key for e in explain(text)]
    assert keys and keys[0] == key, (url, keys)
    assert main(["--explain", text, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["matches"][0]["key"] == key and out["matches"][0]["fixes"]
    assert key in [m.error.key for m in explain_log(text)]  # a log holding it finds it too


def test_the_two_misses_of_issue_21_are_diagnosed():
    """Regression: both got 'No known error matches' before."""
    tensile = (
        "rocBLAS error: Cannot read /home/u/.venv/lib/python3.12/site-packages/torch/lib/rocblas/"
        "library/TensileLibrary.dat: Illegal seek for GPU arch : gfx1031"
    )
    first = explain(tensile)[0]
    assert first.key == "tensile_missing"
    assert any("HSA_OVERRIDE_GFX_VERSION=10.3.0" in f for f in first.fixes)
    miopen = MESSAGES["miopen_db"][0][1] + "\nRuntimeError: miopenStatusInternalError"
    first = explain(miopen)[0]
    assert first.key == "miopen_db"
    assert any("MIOPEN_USER_DB_PATH" in f and "MIOPEN_CUSTOM_CACHE_DIR" in f for f in first.fixes)


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
