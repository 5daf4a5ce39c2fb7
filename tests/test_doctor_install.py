"""The doctor's install commands: the same pin as scripts/setup.sh, with the right interpreter."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from rlamd.doctor import install
from rlamd.doctor.install import (
    DEFAULT_ROCM,
    TORCH_PIN,
    python_command,
    rocm_index_url,
    torch_install_fix,
)
from rlamd.doctor.wheels import INDEX_BASE, TORCH_ROCM_INDEXES, HostTooOld, newest_index

ROOT = Path(__file__).resolve().parents[1]


def test_pin_is_the_one_setup_sh_installs():
    setup = (ROOT / "scripts/setup.sh").read_text()
    version = re.search(r'RLAMD_TORCH_VERSION:-([^}"]+)\}', setup)
    if version is None:  # setup.sh may read the pin from install.py instead of repeating it
        assert "rlamd/doctor/install.py" in setup
    else:
        assert version.group(1) == TORCH_PIN
    # setup.sh asks the same table for the ROCm index rather than building the URL itself
    assert "rlamd/doctor/wheels.py pick" in setup
    assert not re.search(r"whl/rocm\$", setup), "setup.sh builds a ROCm index from the host"
    assert f"rocm{DEFAULT_ROCM}" == newest_index(TORCH_PIN)


def test_readme_states_the_same_pin():
    assert f"torch=={TORCH_PIN}" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("rocm", [None, "7.0.1-20", "7.1.0", "7.2.1", "7.14.0"])
def test_rocm_index_is_one_the_table_lists_for_the_pin(rocm):
    """Regression: rocm7.0/rocm7.1 hosts got whl/rocm7.0, whl/rocm7.1: no torch 2.13.0 there."""
    url = rocm_index_url(rocm)
    assert url.startswith(INDEX_BASE)
    assert url.removeprefix(INDEX_BASE) in TORCH_ROCM_INDEXES[TORCH_PIN]


def test_rocm_index_refuses_a_host_too_old_for_the_pin():
    with pytest.raises(HostTooOld, match=r"ROCm 6\.3\.2"):
        rocm_index_url("6.3.2")


def test_rocm_fix_uninstalls_first_then_installs_the_pin():
    fix = torch_install_fix("rocm", "7.1.0", python="py")
    by_hand = fix.split("by hand:")[1]
    # pip counts 2.13.0+cpu as torch==2.13.0, so without the uninstall it keeps the CPU build
    assert by_hand.index("py -m pip uninstall -y torch") < by_hand.index("py -m pip install")
    assert f"py -m pip install torch=={TORCH_PIN} --index-url {rocm_index_url('7.1.0')}" in fix
    assert "py -m pip uninstall -y torch && RLAMD_TORCH=rocm bash scripts/setup.sh" in fix


def test_rocm_fix_on_a_host_too_old_says_the_ways_out():
    fix = torch_install_fix("rocm", "6.3.2", python="py")
    assert fix.startswith("Uninstall this torch (`py -m pip uninstall -y torch`)")
    older = re.search(r"RLAMD_TORCH_VERSION=(\S+) RLAMD_TORCH_INDEX_URL=(\S+) bash", fix)
    assert older and older.group(2).removeprefix(INDEX_BASE) in TORCH_ROCM_INDEXES[older.group(1)]
    assert "amdgpu-install" in fix and "rocm.nightlies.amd.com" in fix


def test_cuda_fix_uses_pypi():
    fix = torch_install_fix("cuda", python="py")
    assert f"py -m pip install torch=={TORCH_PIN}`" in fix and "--index-url" not in fix
    assert "RLAMD_TORCH=cuda bash scripts/setup.sh" in fix


def test_unknown_flavour_lists_the_accepted_ones():
    with pytest.raises(ValueError, match="accepted: rocm, cuda, cpu"):
        torch_install_fix("rcom")


def test_python_command_is_relative_inside_the_checkout(tmp_path):
    exe = tmp_path / ".venv/bin/python"
    assert python_command(str(exe), cwd=str(tmp_path)) == os.path.join(".venv", "bin", "python")


def test_python_command_is_python_when_that_is_on_path(tmp_path, monkeypatch):
    exe = str(tmp_path / "env/bin/python")
    monkeypatch.setattr(install.shutil, "which", lambda name: exe if name == "python" else None)
    assert python_command(exe, cwd=str(tmp_path / "elsewhere")) == "python"


def test_python_command_is_absolute_otherwise(tmp_path, monkeypatch):
    exe = str(tmp_path / "env/bin/python")
    monkeypatch.setattr(install.shutil, "which", lambda name: "/usr/bin/python")
    assert python_command(exe, cwd=str(tmp_path / "elsewhere")) == exe
