"""The preflight that says the fix before rocBLAS or a missing kernel kills the process.

Regression: on an RX 6700 XT (gfx1031) the first matrix multiply printed
``rocBLAS error: Cannot read .../torch/lib/rocblas/library/TensileLibrary.dat: Illegal seek
for GPU arch : gfx1031`` and aborted (SIGABRT, no Python exception, nothing for the doctor to
explain; https://github.com/ROCm/rocBLAS/issues/1339). The arch list and the Tensile files of
the wheel are now checked before training, by resolve_device and by the doctor.
"""

from __future__ import annotations

import re

import pytest

from rlamd.config import ConfigError
from rlamd.config.checks import check_device
from rlamd.device import KernelCoverageError, resolve_device
from rlamd.doctor import diagnose
from rlamd.gfx import kernel_coverage, tensile_archs, therock_index

from .config.test_checks import ONE_LINE, make_cfg
from .test_device import FakeTorch
from .test_doctor import RX6700, RX6800, SHIPPED, by_name, machine

# What a ROCm wheel's torch/lib/rocblas/library holds (names as shipped, one set per gfx).
TENSILE_FILES = [
    "TensileLibrary.dat",
    "TensileLibrary_lazy_gfx1030.dat",
    "TensileLibrary_lazy_gfx1100.dat",
    "TensileLibrary_lazy_gfx90a.dat",
    "Kernels.so-000-gfx1030.hsaco",
    "Kernels.so-000-gfx90a.hsaco",
    "TensileLibrary_Type_HH_Contraction_l_Alik_Bljk_Cijk_Dijk_gfx942.co",
]


@pytest.fixture
def rocblas(tmp_path):
    folder = tmp_path / "torch/lib/rocblas/library"
    folder.mkdir(parents=True)
    for name in TENSILE_FILES:
        (folder / name).write_text("")
    return folder


class RocmTorch(FakeTorch):
    """A ROCm wheel: its arch list and its rocBLAS folder."""

    def __init__(self, *a, archs=(), library=None, **kw):
        super().__init__(*a, **kw)
        self.archs, self.library = list(archs), library

    def arch_list(self):
        return self.archs

    def rocblas_library_dir(self):
        return self.library


def test_tensile_archs_reads_every_gfx_from_the_file_names(rocblas, tmp_path):
    assert tensile_archs(rocblas) == {"gfx1030", "gfx1100", "gfx90a", "gfx942"}
    assert tensile_archs(tmp_path / "missing") is None and tensile_archs(None) is None
    merged = tmp_path / "merged"
    merged.mkdir()
    (merged / "TensileLibrary.dat").write_text("")
    assert tensile_archs(merged) is None  # names no gfx: unknown, never "covers nothing"


def test_coverage_names_what_is_missing_and_the_fix(rocblas):
    cov = kernel_coverage("gfx1031:xnack-", SHIPPED, tensile_archs(rocblas), None)
    assert not cov.ok and cov.in_arch_list is False and cov.in_tensile is False
    assert "gfx1031: not among this torch's targets" in cov.problem()
    assert "rocBLAS has no Tensile kernels for it" in cov.problem()
    fix = cov.fix()
    assert fix.startswith("Set `export HSA_OVERRIDE_GFX_VERSION=10.3.0`") and "unofficial" in fix
    assert therock_index("gfx1031") in fix and "--device cpu" in fix


def test_the_family_override_covers_the_card(rocblas):
    cov = kernel_coverage("gfx1031", SHIPPED, tensile_archs(rocblas), "10.3.0")
    assert cov.ok and cov.runs_as == "gfx1030" and cov.problem() is None


def test_a_wrong_family_override_is_named(rocblas):
    cov = kernel_coverage("gfx1101", ["gfx1030"], tensile_archs(rocblas), "10.3.0")
    assert not cov.ok and "run as gfx1030" in cov.problem()
    assert "HSA_OVERRIDE_GFX_VERSION=11.0.0` instead of 10.3.0" in cov.fix()


def test_unknown_inputs_are_not_failures():
    cov = kernel_coverage("gfx1031", [], None, None)
    assert cov.ok and cov.in_arch_list is None and cov.in_tensile is None


@pytest.mark.parametrize(
    ("gfx", "family"),
    [("gfx1151", "gfx1151/"), ("gfx1201", "gfx120X-all/"), ("gfx1103", "gfx110X-all/"),
     ("gfx942", "gfx94X-dcgpu/"), ("gfx906", None)],
)  # fmt: skip
def test_therock_index_by_family(gfx, family):
    url = therock_index(gfx)
    assert (url is None) if family is None else url.endswith(family)


# ---------------------------------------------------------------- the run's preflight


def test_resolve_device_refuses_a_card_without_kernels_and_says_the_fix(rocblas):
    api = RocmTorch(hip="7.2", gpus=[RX6700], archs=SHIPPED, library=rocblas)
    for spec in ("hip", "auto", "cuda:0"):
        with pytest.raises(KernelCoverageError) as err:
            resolve_device(spec, api=api, environ={})
        text = str(err.value)
        assert "AMD Radeon RX 6700 XT at cuda:0, gfx1031" in text
        assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in text and "RLAMD_SKIP_KERNEL_CHECK=1" in text


def test_resolve_device_accepts_the_override_and_the_skip(rocblas):
    api = RocmTorch(hip="7.2", gpus=[RX6700], archs=SHIPPED, library=rocblas)
    env = {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}
    assert str(resolve_device("hip", api=api, environ=env)) == "cuda:0"
    assert str(resolve_device("hip", api=api, environ={"RLAMD_SKIP_KERNEL_CHECK": "1"})) == "cuda:0"
    covered = RocmTorch(hip="7.2", gpus=[RX6800], archs=SHIPPED, library=rocblas)
    assert str(resolve_device("auto", api=covered, environ={})) == "cuda:0"


def test_tensile_gap_alone_is_refused(rocblas):
    """gfx1101 is in the arch list but rocBLAS has no Tensile set for it: still an abort."""
    card = ("AMD Radeon RX 7800 XT", "gfx1101", 16 * 2**30)
    api = RocmTorch(hip="7.2", gpus=[card], archs=SHIPPED, library=rocblas)
    with pytest.raises(KernelCoverageError, match=r"rocBLAS has no Tensile kernels"):
        resolve_device("hip", api=api, environ={})


def test_cuda_builds_and_the_cpu_are_not_checked(rocblas):
    nvidia = RocmTorch(cuda="13.0", gpus=[("NVIDIA H200", "", 2**37)], archs=["sm_90"])
    assert str(resolve_device("cuda", api=nvidia, environ={})) == "cuda:0"
    api = RocmTorch(hip="7.2", gpus=[RX6700], archs=SHIPPED, library=rocblas)
    assert str(resolve_device("cpu", api=api, environ={})) == "cpu"


def test_the_run_refuses_before_a_run_folder_exists(rocblas, monkeypatch):
    monkeypatch.delenv("HSA_OVERRIDE_GFX_VERSION", raising=False)
    monkeypatch.delenv("RLAMD_SKIP_KERNEL_CHECK", raising=False)
    api = RocmTorch(hip="7.2", gpus=[RX6700], archs=SHIPPED, library=rocblas)
    with pytest.raises(ConfigError) as err:
        check_device(make_cfg(train={"device": "auto"}), api=api)
    text = str(err.value)
    assert ONE_LINE.match(text) and text.startswith("train.device='auto' (AMD Radeon RX 6700 XT")
    assert text.endswith("accepted: cpu until fixed")


# ---------------------------------------------------------------- the doctor


def test_doctor_fails_a_card_rocblas_has_no_tensile_files_for(tmp_path, rocblas):
    torch = RocmTorch(hip="6.4", gpus=[RX6700], archs=[*SHIPPED, "gfx1031"], library=rocblas)
    r = diagnose(machine(tmp_path, gfx="gfx1031", torch=torch), "hip", app=False)
    c = by_name(r, "gfx1031 rocBLAS kernels")
    assert c.status == "FAIL" and "would abort the process" in c.seen
    assert re.search(r"HSA_OVERRIDE_GFX_VERSION=10\.3\.0", c.fix)
    assert by_name(r, "gfx1031").status == "PASS"  # the arch list alone would have said yes
    assert not r.usable


def test_doctor_passes_a_covered_card(tmp_path, rocblas):
    torch = RocmTorch(hip="6.4", gpus=[RX6800], archs=SHIPPED, library=rocblas)
    r = diagnose(machine(tmp_path, torch=torch), "hip", app=False)
    assert by_name(r, "gfx1030 rocBLAS kernels").status == "PASS" and r.usable
