"""The doctor on faked machines: each layer's verdict and fix, --explain for every row."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlamd.doctor import KNOWN_ERRORS, System, diagnose, explain
from rlamd.doctor.__main__ import main
from rlamd.doctor.system import _run_real

from .test_device import FakeTorch


class Torch(FakeTorch):
    def __init__(self, *a, archs=(), **kw):
        super().__init__(*a, **kw)
        self.archs = list(archs)

    def arch_list(self):
        return self.archs


SHIPPED = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1101"]
RX6800 = ("AMD Radeon RX 6800 XT", "gfx1030", 16 * 2**30)
RX6700 = ("AMD Radeon RX 6700 XT", "gfx1031", 12 * 2**30)


def machine(tmp_path: Path, *, amd=True, nvidia=False, amdgpu=True, kfd=True, access=True, rocm="6.4.1",
            gfx="gfx1030", torch=None, environ=None, groups=("render", "video")) -> System:  # fmt: skip
    root = tmp_path / "root"
    pci = root / "sys/bus/pci/devices"
    pci.mkdir(parents=True)
    if amd:
        d = pci / "0000:03:00.0"
        d.mkdir()
        (d / "vendor").write_text("0x1002\n")
        (d / "class").write_text("0x030000\n")
        (d / "device").write_text("0x73bf\n")
    if nvidia:
        d = pci / "0000:01:00.0"
        d.mkdir()
        (d / "vendor").write_text("0x10de\n")
        (d / "class").write_text("0x030200\n")
        (d / "device").write_text("0x2206\n")
    nic = pci / "0000:00:1f.6"
    nic.mkdir()
    (nic / "vendor").write_text("0x8086\n")
    (nic / "class").write_text("0x020000\n")
    if amdgpu:
        (root / "sys/module/amdgpu").mkdir(parents=True)
    if kfd:
        (root / "dev/dri").mkdir(parents=True)
        (root / "dev/kfd").write_text("")
        (root / "dev/dri/renderD128").write_text("")
    if rocm:
        (root / "opt/rocm/.info").mkdir(parents=True)
        (root / "opt/rocm/.info/version").write_text(f"{rocm}-120\n")

    def run(cmd, timeout):
        if cmd[0] == "rocminfo" and rocm:
            return (
                0,
                f"Agent 1\n  Name:                    AMD Ryzen\nAgent 2\n  Name:                    {gfx}\n",
            )
        if cmd[0] == "lspci":
            return (
                0,
                '03:00.0 "VGA compatible controller" "Advanced Micro Devices, Inc. [AMD/ATI]" "Navi 21 [Radeon RX 6800 XT]"\n',
            )
        return None

    return System(root=root, environ=environ or {}, run=run, torch=torch or Torch(),
                  groups=lambda: set(groups), access=lambda p: access)  # fmt: skip


def by_name(report, name):
    return next(c for c in report.checks if c.name == name)


def test_healthy_rocm_machine(tmp_path):
    sys_ = machine(tmp_path, torch=Torch(hip="6.4.43482", gpus=[RX6800], archs=SHIPPED))
    r = diagnose(sys_, "hip", app=False)
    assert r.usable, r.to_dict()
    assert {c.status for c in r.checks} <= {"PASS", "SKIP"}
    assert "Navi 21" in by_name(r, "AMD GPU on the PCI bus").seen
    assert by_name(r, "rocminfo agents").seen == "gfx1030"
    assert "usable" in r.verdict and "RX 6800 XT" in r.verdict


def test_no_gpu_on_the_bus(tmp_path):
    sys_ = machine(tmp_path, amd=False, amdgpu=False, kfd=False, rocm=None)
    r = diagnose(sys_, "hip", app=False)
    assert not r.usable
    c = by_name(r, "GPU on the PCI bus")
    assert c.status == "FAIL" and "lspci" in c.fix
    cpu = diagnose(sys_, "cpu", app=False)
    assert cpu.usable and not [c for c in cpu.checks if c.status == "FAIL"]
    assert "CPU only" in cpu.verdict


def test_amdgpu_not_loaded(tmp_path):
    r = diagnose(machine(tmp_path, amdgpu=False, torch=Torch(hip="6.4")), "hip", app=False)
    c = by_name(r, "amdgpu kernel module")
    assert c.status == "FAIL" and "modprobe amdgpu" in c.fix and not r.usable


def test_no_kfd_access(tmp_path):
    r = diagnose(
        machine(tmp_path, access=False, groups=("users",), torch=Torch(hip="6.4")), "hip", app=False
    )
    c = by_name(r, "/dev/kfd")
    assert c.status == "FAIL" and "usermod -aG render,video" in c.fix and "users" in c.seen


@pytest.mark.parametrize(
    ("torch", "build"), [(Torch(cuda="13.0"), "CUDA 13.0"), (Torch(), "CPU-only")]
)
def test_wrong_torch_build_on_amd_machine(tmp_path, torch, build):
    r = diagnose(machine(tmp_path, rocm="6.3.2", torch=torch), "auto", app=False)
    c = by_name(r, "PyTorch build")
    assert c.status == "FAIL" and f"{build} build on an AMD machine" in c.seen
    assert "https://download.pytorch.org/whl/rocm6.3" in c.fix  # matches the system ROCm
    assert not r.usable


def test_unsupported_gfx_without_override(tmp_path):
    r = diagnose(
        machine(tmp_path, gfx="gfx1031", torch=Torch(hip="6.4", gpus=[RX6700], archs=SHIPPED)),
        "hip",
        app=False,
    )
    c = by_name(r, "gfx1031")
    assert (
        c.status == "FAIL" and "HSA_OVERRIDE_GFX_VERSION=10.3.0" in c.fix and "unofficial" in c.fix
    )
    assert not r.usable


def test_unsupported_gfx_with_the_override(tmp_path):
    env = {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}
    r = diagnose(
        machine(
            tmp_path,
            gfx="gfx1031",
            environ=env,
            torch=Torch(hip="6.4", gpus=[RX6700], archs=SHIPPED),
        ),
        "hip",
        app=False,
    )
    c = by_name(r, "gfx1031")
    assert c.status == "WARN" and "runs it as gfx1030" in c.seen and "Unofficial" in c.fix
    assert r.usable


def test_override_on_a_card_that_does_not_need_it(tmp_path):
    env = {"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}
    r = diagnose(
        machine(tmp_path, environ=env, torch=Torch(hip="6.4", gpus=[RX6800], archs=SHIPPED)),
        "hip",
        app=False,
    )
    c = by_name(r, "gfx1030")
    assert c.status == "WARN" and "Unset HSA_OVERRIDE_GFX_VERSION" in c.fix


def test_visibility_variable_hiding_all_gpus(tmp_path):
    r = diagnose(
        machine(tmp_path, environ={"HIP_VISIBLE_DEVICES": ""}, torch=Torch(hip="6.4")),
        "hip",
        app=False,
    )
    c = by_name(r, "visibility variables")
    assert (
        c.status == "FAIL"
        and "HIP_VISIBLE_DEVICES=''" in c.seen
        and "unset HIP_VISIBLE_DEVICES" in c.fix
    )
    assert by_name(r, "torch sees the GPU").status == "FAIL"


def test_rocm_torch_version_mismatch(tmp_path):
    r = diagnose(
        machine(tmp_path, rocm="6.1.3", torch=Torch(hip="6.4.1", gpus=[RX6800], archs=SHIPPED)),
        "hip",
        app=False,
    )
    c = by_name(r, "torch HIP vs system ROCm")
    assert c.status == "WARN" and "HIP 6.4, system ROCm 6.1" in c.seen and "rocm6.1" in c.fix
    assert r.usable


def test_nvidia_machine_has_no_false_fails(tmp_path):
    r = diagnose(machine(tmp_path, amd=False, nvidia=True, amdgpu=False, kfd=False, rocm=None,
                         torch=Torch(cuda="13.0", gpus=[("NVIDIA H200", "", 141 * 2**30)])), "auto", app=False)  # fmt: skip
    assert not [c for c in r.checks if c.status == "FAIL"], r.to_dict()
    assert r.usable and "no AMD GPU; CUDA device usable" in r.verdict


def test_application_checks_on_this_cpu(tmp_path):
    r = diagnose(machine(tmp_path, amd=False, amdgpu=False, kfd=False, rocm=None), "cpu", app=True)
    app = [c for c in r.checks if c.layer == "application"]
    assert [c.name for c in app][-2:] == ["replay sample", "DQN update"]
    assert all(c.status == "PASS" and c.ms is not None for c in app) and r.usable


def test_external_commands_time_out():
    t0 = time.perf_counter()
    rc, text = _run_real(["sleep", "5"], 0.3)
    assert rc == 124 and "did not answer" in text and time.perf_counter() - t0 < 2
    assert _run_real(["no-such-tool-rlamd"], 1) is None


SAMPLES = {
    "no_binary_for_gpu": "RuntimeError: HIP error: hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
    "out_of_memory": "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 7.03 GiB",
    "hsa_out_of_resources": "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources.",
    "collective_timeout": "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
    "no_hip_gpus": "RuntimeError: No HIP GPUs are available",
    "cuda_not_available": "torch.cuda.is_available() returns False on my RX 7900",
    "invalid_ordinal": "RuntimeError: HIP error: invalid device ordinal",
    "kfd_permission": "Unable to open /dev/kfd read-write: Permission denied",
    "missing_libs": "OSError: libamdhip64.so.6: cannot open shared object file: No such file or directory",
    "memory_access_fault": "Memory access fault by GPU node-1 (Agent handle: 0x55d1) on address 0x7f. Reason: Page not present or supervisor privilege.",
    "hip_version_mismatch": "hipErrorInsufficientDriver: driver version is insufficient for runtime version",
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


def test_doctor_on_this_machine_is_quick_and_honest():
    t0 = time.perf_counter()
    cpu = subprocess.run(
        [sys.executable, "-m", "rlamd.doctor", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.perf_counter() - t0 < 10
    assert (
        cpu.returncode == 0 and "verdict [PASS] usable" in cpu.stdout and "\033[" not in cpu.stdout
    )
    hip = subprocess.run(
        [sys.executable, "-m", "rlamd.doctor", "--device", "hip", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = json.loads(hip.stdout)
    import torch

    if not torch.cuda.is_available():
        assert hip.returncode == 1 and not report["usable"] and "not usable" in report["verdict"]
