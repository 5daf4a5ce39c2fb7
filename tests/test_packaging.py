"""agents/ and envs/ install as rlamd.agents and rlamd.envs, never as top-level packages."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMPORT = "import rlamd.agents, rlamd.envs, rlamd; print(rlamd.agents.__file__); print(rlamd.envs.__file__)"


def _build_wheel(dest: Path, source: Path = ROOT) -> Path:
    """``pip wheel`` of ``source`` (no dependencies, no build isolation)."""
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run([*cmd, "-w", str(dest), str(source)], check=True, capture_output=True)
    return next(dest.glob("rlamd-*.whl"))


def _source_copy(dest: Path) -> Path:
    """The files a commit would hold (tracked and new, none ignored) copied to ``dest``, so
    a build cannot pick up what a stale ``build/`` of this checkout still holds."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    )
    if listed.returncode != 0:  # not a git checkout (an unpacked sdist): it is clean already
        return ROOT
    for name in listed.stdout.splitlines():
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """One wheel of the files a commit would hold, and that wheel unpacked (a site folder)."""
    base = tmp_path_factory.mktemp("built")
    wheel = _build_wheel(base / "dist", _source_copy(base / "src"))
    zipfile.ZipFile(wheel).extractall(base / "site")
    return wheel, base / "site"


def test_installed_package_imports_from_anywhere(tmp_path):
    """Run from a folder with no sources in it: works for `pip install -e .` and `pip install .`."""
    out = subprocess.run(
        [sys.executable, "-c", IMPORT], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0].endswith(os.path.join("agents", "__init__.py"))
    assert out[1].endswith(os.path.join("envs", "__init__.py"))


def test_wheel_maps_agents_and_envs_inside_rlamd(tmp_path, built):
    wheel, site = built
    names = zipfile.ZipFile(wheel).namelist()
    assert "rlamd/agents/__init__.py" in names and "rlamd/envs/atari.py" in names
    assert not any(n.startswith(("agents/", "envs/")) for n in names)
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


def test_wheel_ships_the_doctors_data_files(tmp_path, built):
    """The known errors and code tables are TOML beside the code: a non-editable install
    must carry every one, and the doctor must read them from there."""
    wheel, site = built
    names = set(zipfile.ZipFile(wheel).namelist())
    data = sorted(
        p.relative_to(ROOT).as_posix()
        for folder in ("errors", "codes")
        for p in (ROOT / "rlamd" / "doctor" / folder).glob("*.toml")
    )
    assert len(data) >= 10 and set(data) <= names, set(data) - names
    out = subprocess.run(
        [sys.executable, "-m", "rlamd.doctor", "--explain", "hipErrorLaunchOutOfResources"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and "hipErrorLaunchOutOfResources" in out.stdout, out.stderr


def test_wheel_ships_the_bench_data_files(tmp_path, built):
    """The bench's tables (suites, published figures) and every peer's
    race recipes are TOML beside the code: a non-editable install must carry each one, and
    the bench must read them from there."""
    wheel, site = built
    names = set(zipfile.ZipFile(wheel).namelist())
    bench = ROOT / "rlamd" / "bench"
    data = sorted(
        p.relative_to(ROOT).as_posix() for p in [*bench.glob("*.toml"), *bench.glob("peers/*.toml")]
    )
    assert len(data) >= 5 and set(data) <= names, set(data) - names
    probe = "import rlamd.bench.__main__ as m; from rlamd.bench.peer import get; "
    probe += "print(m.__file__, len(m.SUITES), get('sb3').recipe('pong', 'ppo').source)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    where, suites, source = out.stdout.split(" ", 2)
    assert where.startswith(str(site)) and int(suites) >= 10 and "rl-baselines3-zoo" in source


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


def _listed_packages() -> set[str]:
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(data["tool"]["setuptools"]["packages"])


def test_every_package_folder_is_listed_in_pyproject():
    """Regression: rlamd.distributed was left out, so a wheel install could not train."""
    folders = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "rlamd").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert folders - _listed_packages() == set()


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_trains_evaluates_and_runs_the_doctor(tmp_path):
    """A plain (non-editable) install outside the source tree: train, evaluate, doctor.

    The new virtualenv gets the wheel itself; its dependencies (torch, ale-py, ...) are
    borrowed from this interpreter's site-packages through a .pth line, which Python adds
    to sys.path *after* the venv's own site-packages, so rlamd comes from the wheel. (The
    editable install's finder there is not run: .pth files in an added folder are not read.)
    """
    import sysconfig
    import venv

    wheel = _build_wheel(tmp_path / "dist")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "_borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    work = tmp_path / "empty"
    work.mkdir()

    def run(*args: str) -> str:
        proc = subprocess.run(
            [str(py), *args],
            cwd=work,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": ""},
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    where = run("-c", "import rlamd.train, rlamd.distributed.plan; print(rlamd.__file__)")
    assert where.strip().startswith(str(site))
    run("-m", "rlamd.train", "cartpole", "--steps", "2000", "--run-name", "w")
    result = run("-m", "rlamd.evaluate", "w", "--episodes", "2", "--json")
    assert '"episodes": 2' in result
    doctor = run("-m", "rlamd.doctor", "--json")
    assert json.loads(doctor)["usable"] is True
    explained = run("-m", "rlamd.doctor", "--explain", "HSA_STATUS_ERROR_INVALID_ISA", "--json")
    assert json.loads(explained)["matches"][0]["key"] == "invalid_isa"
