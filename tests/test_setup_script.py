"""scripts/setup.sh on faked ROCm hosts: the wheel it picks exists, and a host too old for the
pin stops it before anything is installed. No network: a stub python records pip's calls.

Regression: setup.sh installed torch==2.13.0 from ``whl/rocmX.Y`` of the host's ROCm, an index
PyTorch does not publish for most hosts (``No matching distribution found``).
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlamd.doctor.install import TORCH_PIN
from rlamd.doctor.wheels import (
    INDEX_BASE,
    OLDEST_HOST,
    TORCH_ROCM_INDEXES,
    HostTooOld,
    UnknownTorch,
    older_pin,
    pick,
    version_tuple,
)

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "scripts/setup.sh"

STUB_PYTHON = """#!/usr/bin/env bash
# Records every call; runs the wheel table with the real Python; installs nothing.
printf '%s\\n' "$*" >> "$STUB_LOG"
case "$1" in
  rlamd/doctor/wheels.py) exec "$REAL_PY" "$@" ;;
  -m) exit 0 ;;
  -c) case "$2" in
        *"import torch"*) exit 1 ;;
        *sys.prefix*) echo "$VIRTUAL_ENV" ;;
        *) exit 0 ;;
      esac ;;
esac
"""


def _host(tmp_path: Path, rocm: str | None) -> Path:
    """A ROCm folder with ``.info/version`` (none for None)."""
    folder = tmp_path / f"rocm-{rocm or 'none'}"
    (folder / ".info").mkdir(parents=True, exist_ok=True)
    if rocm:
        (folder / ".info" / "version").write_text(f"{rocm}-120\n")
    return folder


def _run(tmp_path: Path, rocm: str | None, *args: str, **env: str) -> tuple[int, str, str, str]:
    """setup.sh with a stub venv python and a fake rocminfo on PATH; (rc, out, err, pip log)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    stub = venv / "bin" / "python"
    stub.write_text(STUB_PYTHON)
    stub.chmod(0o755)
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    (tools / "rocminfo").write_text("#!/bin/sh\nexit 0\n")
    (tools / "rocminfo").chmod(0o755)
    log = tmp_path / "calls.log"
    log.write_text("")
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RLAMD_", "ROCM_", "VIRTUAL_ENV", "PIP_"))
    }
    full = {
        **clean,
        "PATH": f"{tools}{os.pathsep}{clean.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv),
        "ROCM_PATH": str(_host(tmp_path, rocm)),
        "STUB_LOG": str(log),
        "REAL_PY": sys.executable,
        **env,
    }
    proc = subprocess.run(
        ["bash", str(SETUP), *args], env=full, capture_output=True, text=True, timeout=120
    )
    return proc.returncode, proc.stdout, proc.stderr, log.read_text()


def _pair(out: str) -> tuple[str, str]:
    torch = re.search(r"torch: torch==(\S+)", out).group(1)
    index = re.search(r"index: (\S+)", out).group(1)
    return torch, index


HOSTS_THAT_RUN_THE_PIN = [None, "7.1.0", "7.2.1", "7.14.0"]
HOSTS_TOO_OLD = ["5.7.0", "6.2.4", "6.4.1"]


@pytest.mark.parametrize("rocm", HOSTS_THAT_RUN_THE_PIN)
def test_dry_run_names_a_wheel_that_exists_and_installs_nothing(tmp_path, rocm):
    rc, out, err, calls = _run(tmp_path, rocm, "--dry-run")
    assert rc == 0, err
    torch, index = _pair(out)
    assert torch == TORCH_PIN and index.startswith(INDEX_BASE)
    assert index.removeprefix(INDEX_BASE) in TORCH_ROCM_INDEXES[torch], (torch, index)
    assert "flavour rocm" in out and "nothing was installed" in out
    assert not [c for c in calls.splitlines() if c.startswith("-m")], calls  # pip never ran


@pytest.mark.parametrize("rocm", HOSTS_TOO_OLD)
def test_host_too_old_stops_before_installing_and_says_the_ways_out(tmp_path, rocm):
    for args in (("--dry-run",), ("--dev",)):
        rc, _out, err, calls = _run(tmp_path, rocm, *args)
        assert rc == 3 and "stopped before installing anything" in err
        assert not [c for c in calls.splitlines() if c.startswith("-m")], calls
    assert f"this host has ROCm {rocm}" in err and "amdgpu-install" in err
    older = re.search(r"RLAMD_TORCH_VERSION=(\S+) RLAMD_TORCH_INDEX_URL=(\S+) bash", err)
    assert older, err
    torch, url = older.groups()
    index = url.removeprefix(INDEX_BASE)
    assert index in TORCH_ROCM_INDEXES[torch]  # the older pin is a pair that exists
    assert version_tuple(OLDEST_HOST[index]) <= version_tuple(rocm)  # and this host runs it
    assert "--index-url https://rocm.nightlies.amd.com/" in err  # AMD's own wheels


def test_rocm_install_uses_the_picked_index(tmp_path):
    rc, _out, err, calls = _run(tmp_path, "7.1.0", "--dev")
    assert rc == 0, err
    url = INDEX_BASE + pick(TORCH_PIN, "7.1.0").index
    assert f"-m pip --disable-pip-version-check install torch=={TORCH_PIN} --index-url {url}" in (
        calls.splitlines()
    )
    assert "-m pip --disable-pip-version-check install -e .[dev]" in calls.splitlines()
    assert "triton" not in calls  # ROCm torch brings pytorch-triton-rocm: never replaced


def test_cpu_path_is_unchanged(tmp_path):
    """CI: the CPU wheel from pip's own config (the local find-links), no index URL."""
    rc, _out, err, calls = _run(tmp_path, None, "--dev", RLAMD_TORCH="cpu")
    assert rc == 0, err
    lines = calls.splitlines()
    assert f"-m pip --disable-pip-version-check install torch=={TORCH_PIN}" in lines
    assert not [c for c in lines if "--index-url" in c]
    triton = "-m pip --disable-pip-version-check install triton==3.9.0" in lines
    assert triton == (platform.system() == "Linux" and platform.machine() == "x86_64")


def test_index_url_override_is_used_as_given(tmp_path):
    url = "https://download.pytorch.org/whl/rocm6.4"
    rc, out, err, _ = _run(
        tmp_path, "6.2.4", "--dry-run", RLAMD_TORCH_VERSION="2.9.1", RLAMD_TORCH_INDEX_URL=url
    )
    assert rc == 0, err
    assert _pair(out) == ("2.9.1", url) and "used as given" in out


def test_a_torch_release_the_table_lacks_is_refused(tmp_path):
    rc, _, err, calls = _run(tmp_path, "7.2.0", "--dry-run", RLAMD_TORCH_VERSION="2.12.7")
    assert rc == 3 and "no ROCm wheel in rlamd's table" in err and "RLAMD_TORCH_INDEX_URL" in err
    assert "-m" not in calls


def test_unknown_flavour_is_refused_before_anything(tmp_path):
    rc, _, err, calls = _run(tmp_path, "7.2.0", "--dry-run", RLAMD_TORCH="rcom")
    assert rc == 2 and "accepted: rocm cuda cpu skip" in err and calls == ""


# ---------------------------------------------------------------- the table itself

HOST_GRID = [
    f"{major}.{minor}.{patch}" for major in (5, 6, 7) for minor in range(16) for patch in (0, 4)
]


@pytest.mark.parametrize("torch", list(TORCH_ROCM_INDEXES))
def test_pick_never_leaves_the_table(torch):
    for host in [None, *HOST_GRID]:
        try:
            chosen = pick(torch, host)
        except HostTooOld as exc:
            assert host is not None and f"ROCm {host}" in str(exc)
            assert all(
                version_tuple(OLDEST_HOST[i]) > version_tuple(host)
                for i in TORCH_ROCM_INDEXES[torch]
            )
            continue
        assert chosen.index in TORCH_ROCM_INDEXES[torch]
        if host is not None:  # the driver runs it: AMD's two-release rule
            assert version_tuple(OLDEST_HOST[chosen.index]) <= version_tuple(host)


def test_pick_prefers_the_hosts_own_rocm_when_published():
    assert pick("2.6.0", "6.2.4").index == "rocm6.2.4"
    assert pick("2.6.0", "6.1.3").index == "rocm6.1"
    assert pick("2.6.0", "6.3.0").index == "rocm6.2.4"  # newest the 6.3 driver runs
    assert pick("2.5.1", None).index == "rocm6.2"  # no host version: the newest


def test_older_pin_is_the_newest_release_the_host_runs():
    assert older_pin("6.2.4").torch == "2.9.1" and older_pin("6.2.4").index == "rocm6.4"
    assert older_pin("5.7.1").torch == "2.6.0" and older_pin("5.7.1").index == "rocm6.1"
    assert older_pin("5.4.0") is None


def test_every_index_has_its_oldest_host():
    indexes = {i for pair in TORCH_ROCM_INDEXES.values() for i in pair}
    assert indexes == set(OLDEST_HOST)
    for index, oldest in OLDEST_HOST.items():  # a driver runs user space up to 2 releases newer
        assert version_tuple(oldest) < version_tuple(index)


def test_unknown_torch_and_bad_versions_are_refused_with_what_is_accepted():
    with pytest.raises(UnknownTorch, match=r"releases it lists: 2\.13\.0"):
        pick("1.13.1", "6.2.4")
    with pytest.raises(ValueError, match=r"accepted: X\.Y or X\.Y\.Z"):
        pick(TORCH_PIN, "latest")


def test_the_table_runs_without_rlamd_or_torch():
    """setup.sh runs it by path before anything is installed: standard library only."""
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "rlamd/doctor/wheels.py", "pick", "--torch", TORCH_PIN],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    url, reason = proc.stdout.splitlines()
    assert url.removeprefix(INDEX_BASE) in TORCH_ROCM_INDEXES[TORCH_PIN] and reason


def test_the_readme_table_is_what_setup_sh_does():
    """README's 'host ROCm -> what setup.sh installs' rows, checked against the table."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Installing PyTorch for ROCm") :]
    section = section[: section.index("\n## ")]
    rows = [r for r in section.splitlines() if r.startswith("| ") and "setup.sh" not in r]
    checked = 0
    for row in rows:
        host_cell, what = (c.strip() for c in row.strip("|").split("|")[:2])
        hosts = [f"{v}.0" for v in re.findall(r"(\d+\.\d+)\.x", host_cell)]
        if host_cell.startswith("none found"):
            hosts = [None]
        for host in hosts:
            checked += 1
            if what.startswith("stops"):
                with pytest.raises(HostTooOld):
                    pick(TORCH_PIN, host)
                older = older_pin(host)
                assert (
                    f"RLAMD_TORCH_VERSION={older.torch} RLAMD_TORCH_INDEX_URL={older.url}" in what
                )
            else:
                assert f"`torch=={TORCH_PIN}` from `{pick(TORCH_PIN, host).url}`" in what, row
    assert checked >= 9, "the README lost its ROCm rows"
