"""Every code of every status table is diagnosed: by name, by the library's own text, by
number where the table says how a message carries it."""

from __future__ import annotations

import json

import pytest

from rlamd.doctor.__main__ import main
from rlamd.doctor.codes import TABLES, code_errors, load_tables
from rlamd.doctor.known_errors import explain

CODES = [(t, c) for t in load_tables() for c in t.codes]


def test_every_library_table_is_there_and_cites_its_header():
    tables = {t.id: t for t in load_tables()}
    assert set(tables) == set(TABLES)
    sizes = {t.id: len(t.codes) for t in load_tables()}
    # The enums as the headers list them (HIP counts its deprecated aliases).
    assert sizes["hip"] >= 75 and sizes["hsa"] >= 40 and sizes["rocblas"] == 15
    assert sizes["hipblas"] == 11 and sizes["miopen"] == 10 and sizes["rccl"] == 7
    for t in tables.values():
        assert t.source.startswith("https://github.com/"), t.id
    assert tables["hip"].source.endswith("include/hip/hip_runtime_api.h")
    assert tables["hsa"].source.endswith("inc/hsa.h")


def _sample(table, code) -> str:
    if table.id == "triton":
        return {
            "OutOfResources: shared memory": "out of resource: shared memory, Required: 98304, Hardware limit: 65536.",
            "OutOfResources: threads": "out of resource: threads, Required: 2048, Hardware limit: 1024.",
            "OutOfResources: other resource": "out of resource: tensor memory, Required: 600, Hardware limit: 512.",
            "AMD LLVM error": "RuntimeError: AMD LLVM 1a2b3c: failed to legalize operation",
            "LLVM ERROR": "LLVM ERROR: Cannot select: intrinsic %llvm.amdgcn.foo",
            "CompilationError": "triton.compiler.errors.CompilationError: at 12:4:",
            "unsupported target": "'gfx1036' is not a recognized processor for this target (ignoring processor)",
        }[code.name]
    return f"RuntimeError: failed with {code.name} in step 3"


@pytest.mark.parametrize(("table", "code"), CODES, ids=[f"{t.id}-{c.name}" for t, c in CODES])
def test_every_code_gets_its_meaning_causes_and_commands(table, code):
    rows = code_errors(_sample(table, code))
    assert rows and rows[0].key == f"{table.id}:{code.name}"
    row = rows[0]
    assert code.name in row.title and row.causes[0] and row.fixes
    assert "{" not in row.causes[0]  # the message's numbers are filled in
    assert any("`" in f or f.startswith("Nothing") for f in row.fixes)
    if code.text:  # the library's own string names the code too
        prefix = "HIP error: " if table.id == "hip" else ""
        assert f"{table.id}:{code.name}" in [r.key for r in code_errors(prefix + code.text)]


def test_numbers_name_codes_as_messages_print_them():
    assert code_errors("hip error code: 701")[0].key == "hip:hipErrorLaunchOutOfResources"
    hsa = "Callback: Queue 0x7f aborting with error : HSA_STATUS_ERROR: x. code: 0x1016"
    assert "hsa:HSA_STATUS_ERROR_EXCEPTION" in [r.key for r in code_errors(hsa)]
    # cuBLAS spellings of the hipBLAS statuses (PyTorch's hipified messages)
    assert code_errors("CUBLAS_STATUS_NOT_SUPPORTED when calling `hipblasLtMatmul`")[0].key == (
        "hipblas:HIPBLAS_STATUS_NOT_SUPPORTED"
    )
    # a short text counts only after "HIP error:"
    assert code_errors("the model ran out of memory budget") == []
    assert code_errors("CUDA error: out of memory")[0].key == "hip:hipErrorOutOfMemory"


def test_the_two_examples_of_the_issue(capsys):
    assert main(["--explain", "RuntimeError: HIP error: hipErrorLaunchOutOfResources"]) == 0
    out = capsys.readouterr().out
    assert "hipErrorLaunchOutOfResources = 701" in out and "AMD_SERIALIZE_KERNEL=3" in out
    msg = (
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, "
        "Hardware limit: 65536."
    )
    assert main(["--explain", msg, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["matches"]
    # The curated AMD row (64 KiB LDS, num_stages per AMD's guide) first, then the code.
    assert [r["key"] for r in rows] == ["triton_lds_64k", "triton:OutOfResources: shared memory"]
    assert any("num_stages=2" in f for f in rows[0]["fixes"])
    assert "98304" in rows[1]["causes"][0] and "65536" in rows[1]["causes"][0]


def test_a_curated_failure_answers_before_the_bare_code():
    keys = [
        e.key
        for e in explain(
            "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"
        )
    ]
    assert keys[0] == "no_binary_for_gpu" and "hip:hipErrorNoBinaryForGpu" in keys
