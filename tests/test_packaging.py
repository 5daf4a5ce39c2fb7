"""agents/ and envs/ install as rlamd.agents and rlamd.envs, never as top-level packages."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMPORT = "import rlamd.agents, rlamd.envs, rlamd; print(rlamd.agents.__file__); print(rlamd.envs.__file__)"


def test_installed_package_imports_from_anywhere(tmp_path):
    """Run from a folder with no sources in it: works for `pip install -e .` and `pip install .`."""
    out = subprocess.run(
        [sys.executable, "-c", IMPORT], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0].endswith(os.path.join("agents", "__init__.py"))
    assert out[1].endswith(os.path.join("envs", "__init__.py"))


def test_wheel_maps_agents_and_envs_inside_rlamd(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(ROOT)],
        check=True, capture_output=True,
    )  # fmt: skip
    wheel = next((tmp_path / "dist").glob("rlamd-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "rlamd/agents/__init__.py" in names and "rlamd/envs/atari.py" in names
    assert not any(n.startswith(("agents/", "envs/")) for n in names)
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-c", IMPORT],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0].startswith(str(site)) and out[1].startswith(str(site))


def test_a_copied_source_tree_imports_its_own_agents_and_envs(tmp_path):
    """What `ray job submit --working-dir .` ships: the job imports rlamd from the copy,
    and rlamd.agents / rlamd.envs must come from the same copy."""
    import shutil

    for name in ("rlamd", "agents", "envs"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", IMPORT], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == str(tmp_path / "agents" / "__init__.py")
    assert out[1] == str(tmp_path / "envs" / "__init__.py")


def test_setup_script_rejects_unknown_option():
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts/setup.sh"), "--gpu"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "accepted: --dev --bench --ray" in proc.stderr


@pytest.mark.parametrize("module", ["rlamd.train"])
def test_entry_points_explain_themselves(module):
    proc = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "usage" in proc.stdout.lower()
