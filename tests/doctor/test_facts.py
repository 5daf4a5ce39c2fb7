"""--explain with the machine's facts: the specific fix for this gfx, the HIP_VISIBLE_DEVICES
that hides the integrated GPU, the GTT limit of an APU, WSL, and "not the machine that
failed" where there is no AMD GPU. Machines are faked with a sysfs tree."""

from __future__ import annotations

import json
from pathlib import Path

from rlamd.doctor import System
from rlamd.doctor.__main__ import main
from rlamd.doctor.explainer import explain_text, recognise
from rlamd.doctor.facts import read_facts

from ..test_device import FakeTorch

INVALID_IMAGE = "torch.AcceleratorError: HIP error: device kernel image is invalid"


class Torch(FakeTorch):
    def __init__(self, *a, archs=(), **kw):
        super().__init__(*a, **kw)
        self.archs = list(archs)

    def arch_list(self):
        return self.archs


def _version(gfx: str) -> int:
    """``gfx1036`` -> 100306, ``gfx90a`` -> 90010 (KFD's gfx_target_version)."""
    digits = gfx[3:]
    if len(digits) == 4:
        return int(digits[:2]) * 10000 + int(digits[2]) * 100 + int(digits[3], 16)
    return int(digits[0]) * 10000 + int(digits[1], 16) * 100 + int(digits[2], 16)


def fake(
    tmp_path: Path,
    gpus,
    *,
    archs=(),
    environ=None,
    ram_gib=64,
    osrelease="6.8.0-45-generic",
    cmdline="BOOT_IMAGE=/vmlinuz quiet",
    lockup=None,
) -> System:
    """``gpus``: (gfx, apu) in KFD order, after node 0 (the CPU)."""
    root = tmp_path / "root"
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0/properties").write_text("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n")
    for i, (gfx, apu) in enumerate(gpus, start=1):
        (nodes / str(i)).mkdir()
        cores = 16 if apu and gfx == "gfx942" else 0
        (nodes / str(i) / "properties").write_text(
            f"cpu_cores_count {cores}\nsimd_count 96\ngfx_target_version {_version(gfx)}\n"
        )
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text(osrelease + "\n")
    (root / "proc/meminfo").write_text(f"MemTotal:       {ram_gib * 2**20} kB\n")
    (root / "proc/cmdline").write_text(cmdline + "\n")
    params = root / "sys/module/amdgpu/parameters"
    params.mkdir(parents=True)
    if lockup is not None:
        (params / "lockup_timeout").write_text(lockup + "\n")
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    torch = Torch(hip="6.4.43482", gpus=[(f"GPU {g}", g, 16 * 2**30) for g, _ in gpus], archs=archs)
    return System(root=root, environ=environ or {}, run=lambda cmd, t: None, torch=torch)


def test_the_integrated_gpu_is_named_and_hidden(tmp_path):
    sys_ = fake(tmp_path, [("gfx1100", False), ("gfx1036", True)], archs=["gfx1100"])
    facts = read_facts(sys_)
    assert [(g.index, g.gfx, g.apu) for g in facts.gpus] == [
        (0, "gfx1100", False),
        (1, "gfx1036", True),
    ]
    assert facts.flags == {"apu", "igpu_and_dgpu"}
    out = explain_text(INVALID_IMAGE, sys_)
    first = out["matches"][0]
    assert first["key"] == "igpu_beside_dgpu"  # without the facts: no_binary_for_gpu
    assert any(
        "`export HIP_VISIBLE_DEVICES=0`" in h and "GPU 1 gfx1036" in h for h in first["here"]
    )


def test_the_override_for_this_gfx_and_no_override_for_a_listed_one(tmp_path):
    rx6700 = fake(tmp_path / "a", [("gfx1031", False)], archs=["gfx1030", "gfx1100"])
    here = explain_text("hipErrorNoBinaryForGpu: Unable to find code object", rx6700)
    assert "`export HSA_OVERRIDE_GFX_VERSION=10.3.0` for GPU 0 gfx1031" in "\n".join(
        here["matches"][0]["here"]
    )
    listed = fake(
        tmp_path / "b",
        [("gfx1100", False)],
        archs=["gfx1100"],
        environ={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"},
    )
    here = explain_text(
        "Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x7f.", listed
    )
    lines = "\n".join(here["matches"][0]["here"])
    assert "`unset HSA_OVERRIDE_GFX_VERSION`" in lines and "gfx1100" in lines


def test_an_apu_gets_its_gtt_limit_sized_to_its_memory(tmp_path):
    strix = fake(tmp_path, [("gfx1151", True)], archs=["gfx1151"], ram_gib=128)
    msg = "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.08 GiB."
    out = explain_text(msg, strix)
    assert out["matches"][0]["key"] == "apu_gtt_limit"  # before the general OOM row
    assert any("pages_limit=25165824" in h and "96 GiB" in h for h in out["matches"][0]["here"])


def test_kernel_parameters_and_command_line_are_read(tmp_path):
    sys_ = fake(
        tmp_path,
        [("gfx942", False)],
        archs=["gfx942"],
        lockup="-1",
        cmdline="BOOT_IMAGE=/vmlinuz iommu=pt",
    )
    hang = explain_text("[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout", sys_)
    assert any("amdgpu.lockup_timeout is -1 here" in h for h in hang["matches"][0]["here"])
    rccl = explain_text('NCCL WARN Missing "iommu=pt" from kernel command line', sys_)
    assert any("already has iommu=pt" in h for h in rccl["matches"][0]["here"])


def test_wsl_is_recognised(tmp_path):
    sys_ = fake(tmp_path, [], osrelease="5.15.167.4-microsoft-standard-WSL2")
    facts = read_facts(sys_)
    assert facts.wsl and facts.has_amd_gpu is True and "wsl" in facts.flags
    out = explain_text(
        "WSL environment detected.\nhsa_init Failed, possibly no supported GPU devices", sys_
    )
    assert out["matches"][0]["key"] == "wsl_dxg_detection"
    assert any("HSA_ENABLE_DXG_DETECTION=1" in h for h in out["matches"][0]["here"])


def test_a_machine_without_an_amd_gpu_says_it_is_not_the_one_that_failed(tmp_path, capsys):
    sys_ = fake(tmp_path, [])
    assert main(["--explain", INVALID_IMAGE], system=sys_) == 0
    out = capsys.readouterr().out
    assert "no AMD GPU" in out and "not the one that failed" in out
    assert "on this machine:" not in out  # no machine-specific fix from a machine without one


def test_an_unknown_message_gets_what_was_recognised_the_next_commands_and_a_report(
    tmp_path, capsys
):
    sys_ = fake(tmp_path, [("gfx1100", False)], archs=["gfx1100"])
    msg = "my_op failed: hipErrorFooBar in rocBLAS on gfx1100 at 0x00007f2a53193000"
    assert main(["--explain", msg, "--json"], system=sys_) == 1
    out = json.loads(capsys.readouterr().out)
    u = out["unmatched"]
    assert u["recognised"]["status codes"] == ["hipErrorFooBar"]
    assert (
        u["recognised"]["gfx targets"] == ["gfx1100"] and "rocBLAS" in u["recognised"]["libraries"]
    )
    assert any("AMD_SERIALIZE_KERNEL=3" in c for c in u["next_commands"])
    assert any("dmesg" in c for c in u["next_commands"]) and any(
        "rocminfo" in c for c in u["next_commands"]
    )
    assert u["report"]["message"] == msg and u["report"]["doctor"]["checks"]
    assert main(["--explain", msg], system=sys_) == 1
    text = capsys.readouterr().out
    assert "Known errors:" not in text  # never a bare list of titles
    assert "```json" in text and '"message": "my_op failed' in text


def test_recognise_finds_each_kind_once():
    found = recognise(
        "HSA_STATUS_ERROR_FOO x HSA_STATUS_ERROR_FOO /opt/rocm/lib/libfoo.so.6 gfx90a MIOpen"
    )
    assert found["status codes"] == ["HSA_STATUS_ERROR_FOO"]
    assert found["files"] == ["/opt/rocm/lib/libfoo.so.6"] and found["gfx targets"] == ["gfx90a"]
