"""The host memory a replay may take: MemAvailable, the cgroup's room and RLIMIT_AS
(issue 34, case 7: under ``ulimit -v`` a DQN run died in numpy's allocator)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlamd.hostalloc import host_free_bytes

ROOT = Path(__file__).resolve().parents[1]


def _proc(tmp_path: Path, cgroup: str, available_kib: int = 8 * 2**20) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(f"MemTotal: 9 kB\nMemAvailable:   {available_kib} kB\n")
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "self" / "status").write_text("VmSize:\t  1000 kB\n")
    return proc


def test_memavailable_alone_without_a_cgroup_limit(tmp_path):
    proc = _proc(tmp_path, "0::/\n")
    (tmp_path / "cg").mkdir()
    (tmp_path / "cg" / "memory.max").write_text("max\n")
    assert host_free_bytes(proc=proc, cgroup_root=tmp_path / "cg") == 8 * 2**30


def test_a_cgroup_v2_limit_less_its_usage(tmp_path):
    proc = _proc(tmp_path, "0::/user.slice/job\n")
    job = tmp_path / "cg" / "user.slice" / "job"
    job.mkdir(parents=True)
    (job / "memory.max").write_text(str(3 * 2**30))
    (job / "memory.current").write_text(str(2**30))
    assert host_free_bytes(proc=proc, cgroup_root=tmp_path / "cg") == 2 * 2**30


def test_a_cgroup_v1_limit_at_the_mount_root_inside_a_container(tmp_path):
    """A container sees its own cgroup at the mount's root, not at the path it is named by."""
    proc = _proc(tmp_path, "4:memory:/docker/abc\n3:cpu:/\n")
    mem = tmp_path / "cg" / "memory"
    mem.mkdir(parents=True)
    (mem / "memory.limit_in_bytes").write_text(str(5 * 2**30))
    (mem / "memory.usage_in_bytes").write_text(str(4 * 2**30))
    assert host_free_bytes(proc=proc, cgroup_root=tmp_path / "cg") == 2**30


def test_v1_writes_no_limit_as_a_huge_number(tmp_path):
    proc = _proc(tmp_path, "4:memory:/\n")
    mem = tmp_path / "cg" / "memory"
    mem.mkdir(parents=True)
    (mem / "memory.limit_in_bytes").write_text("9223372036854771712")
    (mem / "memory.usage_in_bytes").write_text("100")
    assert host_free_bytes(proc=proc, cgroup_root=tmp_path / "cg") == 8 * 2**30


_LIMITED = """
import resource, sys
import torch  # imported before the limit: its mappings count in VmSize
from rlamd.train import main
size = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize:"))
limit = size + 1536 * 2**20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_an_address_space_limit_refuses_a_replay_that_does_not_fit_in_one_line(tmp_path):
    args = ["cartpole", "--algo", "dqn", "--steps", "64", "--logdir", str(tmp_path)]
    args += ["--no-tensorboard", "--device", "cpu", "--set", "dqn.buffer_size=100000000"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _LIMITED, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: dqn.buffer_size=100,000,000 needs")
    assert "accepted here: at most" in line and "--set dqn.buffer_size=auto" in line
