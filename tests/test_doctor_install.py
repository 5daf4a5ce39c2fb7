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

ROOT = Path(__file__).resolve().parents[1]


def test_pin_is_the_one_setup_sh_installs():
    setup = (ROOT / "scripts/setup.sh").read_text()
    version = re.search(r'RLAMD_TORCH_VERSION:-([^}"]+)\}', setup)
    if version is None:  # setup.sh may read the pin from install.py instead of repeating it
        assert "rlamd/doctor/install.py" in setup
    else:
        assert version.group(1) == TORCH_PIN
    rocm = re.search(r"whl/rocm\$\{rocm_version:-([\d.]+)\}", setup)
    assert rocm is not None and rocm.group(1) == DEFAULT_ROCM


def test_readme_states_the_same_pin():
    assert f"torch=={TORCH_PIN}" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize(
    ("rocm", "url"),
    [
        (None, f"https://download.pytorch.org/whl/rocm{DEFAULT_ROCM}"),
        ("6.3.2", "https://download.pytorch.org/whl/rocm6.3"),
        ("7.0.1-20", "https://download.pytorch.org/whl/rocm7.0"),
    ],
)
def test_rocm_index_follows_the_system_rocm(rocm, url):
    assert rocm_index_url(rocm) == url


def test_rocm_fix_uninstalls_first_then_installs_the_pin():
    fix = torch_install_fix("rocm", "6.3.2", python="py")
    by_hand = fix.split("by hand:")[1]
    # pip counts 2.13.0+cpu as torch==2.13.0, so without the uninstall it keeps the CPU build
    assert by_hand.index("py -m pip uninstall -y torch") < by_hand.index("py -m pip install")
    assert f"py -m pip install torch=={TORCH_PIN} --index-url {rocm_index_url('6.3.2')}" in fix
    assert "py -m pip uninstall -y torch && RLAMD_TORCH=rocm bash scripts/setup.sh" in fix


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
