"""The doctor on faked machines: each layer's verdict and fix, --explain for every row."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlamd.doctor import KNOWN_ERRORS, System, diagnose
from rlamd.doctor.__main__ import format_report, main
from rlamd.doctor.checks import ENV_VARS, interfaces_matching
from rlamd.doctor.install import TORCH_PIN, rocm_index_url
from rlamd.doctor.system import _run_real
from rlamd.doctor.wheels import OLDEST_HOST, TORCH_ROCM_INDEXES
from rlamd.gfx import THEROCK_INDEXES

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


def _pci_device(path: Path, vendor: str, klass: str, device: str | None = None) -> None:
    path.mkdir()
    (path / "vendor").write_text(f"{vendor}\n")
    (path / "class").write_text(f"{klass}\n")
    if device is not None:
        (path / "device").write_text(f"{device}\n")


def _fake_commands(rocm, gfx):
    """rocminfo (when ROCm is installed) and lspci as they answer on an RX 6800 XT machine."""

    def run(cmd, timeout):
        if cmd[0] == "rocminfo" and rocm:
            agents = f"Agent 1\n  Name:{' ' * 20}AMD Ryzen\nAgent 2\n  Name:{' ' * 20}{gfx}\n"
            return (0, agents)
        if cmd[0] == "lspci":
            return (
                0,
                '03:00.0 "VGA compatible controller" "Advanced Micro Devices, Inc. [AMD/ATI]" '
                '"Navi 21 [Radeon RX 6800 XT]"\n',
            )
        return None

    return run


def machine(
    tmp_path: Path,
    *,
    amd=True,
    nvidia=False,
    amdgpu=True,
    kfd=True,
    access=True,
    rocm="6.4.1",
    gfx="gfx1030",
    torch=None,
    environ=None,
    groups=("render", "video"),
    net=("eth0", "lo"),
) -> System:
    root = tmp_path / "root"
    for name in net:
        (root / "sys/class/net" / name).mkdir(parents=True)
    pci = root / "sys/bus/pci/devices"
    pci.mkdir(parents=True)
    if amd:
        _pci_device(pci / "0000:03:00.0", "0x1002", "0x030000", "0x73bf")
    if nvidia:
        _pci_device(pci / "0000:01:00.0", "0x10de", "0x030200", "0x2206")
    _pci_device(pci / "0000:00:1f.6", "0x8086", "0x020000")  # a network card, not a GPU
    if amdgpu:
        (root / "sys/module/amdgpu").mkdir(parents=True)
    if kfd:
        (root / "dev/dri").mkdir(parents=True)
        (root / "dev/kfd").write_text("")
        (root / "dev/dri/renderD128").write_text("")
    if rocm:
        (root / "opt/rocm/.info").mkdir(parents=True)
        (root / "opt/rocm/.info/version").write_text(f"{rocm}-120\n")
    return System(
        root=root,
        environ=environ or {},
        run=_fake_commands(rocm, gfx),
        torch=torch or Torch(),
        groups=lambda: set(groups),
        access=lambda p: access,
    )


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
    r = diagnose(machine(tmp_path, rocm="7.1.0", torch=torch), "auto", app=False)
    c = by_name(r, "PyTorch build")
    assert c.status == "FAIL" and f"{build} build on an AMD machine" in c.seen
    # pinned like scripts/setup.sh, from the index it picks for this host (no rocm7.1 for the pin)
    expected = rocm_index_url("7.1.0")
    assert TORCH_ROCM_INDEXES[TORCH_PIN] and expected.endswith(TORCH_ROCM_INDEXES[TORCH_PIN])
    assert f"torch=={TORCH_PIN} --index-url {expected}" in c.fix
    assert "RLAMD_TORCH=rocm bash scripts/setup.sh" in c.fix and "uninstall -y torch" in c.fix
    assert not r.usable


def test_wrong_torch_build_on_a_host_too_old_for_the_pin(tmp_path):
    """Regression: the fix named whl/rocm6.3 for torch 2.13.0, a wheel that does not exist."""
    r = diagnose(machine(tmp_path, rocm="6.3.2", torch=Torch()), "auto", app=False)
    c = by_name(r, "PyTorch build")
    named = re.findall(r"download\.pytorch\.org/whl/(rocm[\d.]+)", c.fix)
    assert "rocm6.3" not in re.findall(r"torch==2\.13\.0 --index-url \S+", c.fix)
    assert named and all(any(i in TORCH_ROCM_INDEXES[v] for v in TORCH_ROCM_INDEXES) for i in named)
    assert "uninstall -y torch" in c.fix and "RLAMD_TORCH_VERSION=" in c.fix


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


def test_rocm_torch_too_new_for_the_driver(tmp_path):
    r = diagnose(
        machine(tmp_path, rocm="6.1.3", torch=Torch(hip="6.4.1", gpus=[RX6800], archs=SHIPPED)),
        "hip",
        app=False,
    )
    c = by_name(r, "torch HIP vs system ROCm")
    assert c.status == "WARN" and "HIP 6.4, system ROCm 6.1" in c.seen
    assert f"ROCm {OLDEST_HOST['rocm6.4']} or newer" in c.seen
    # the pin has no wheel for a ROCm 6.1 driver: the fix says so rather than naming whl/rocm6.1
    assert "whl/rocm6.1 " not in c.fix and "RLAMD_TORCH_VERSION=" in c.fix
    assert r.usable


def test_rocm_torch_on_a_newer_driver_passes(tmp_path):
    r = diagnose(
        machine(tmp_path, rocm="7.1.0", torch=Torch(hip="7.2.1", gpus=[RX6800], archs=SHIPPED)),
        "hip",
        app=False,
    )
    c = by_name(r, "torch HIP vs system ROCm")
    assert c.status == "PASS" and "HIP 7.2 runs on the driver of ROCm 7.1" in c.seen


def test_nvidia_machine_has_no_false_fails(tmp_path):
    r = diagnose(
        machine(
            tmp_path,
            amd=False,
            nvidia=True,
            amdgpu=False,
            kfd=False,
            rocm=None,
            torch=Torch(cuda="13.0", gpus=[("NVIDIA H200", "", 141 * 2**30)]),
        ),
        "auto",
        app=False,
    )
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


def test_doctor_on_this_machine_is_honest():
    # The subprocess timeout only guards against a hang; how fast the doctor is belongs in
    # no unit test (it depends on the machine's load). The two doctors run side by side.
    def doctor(*args: str) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "rlamd.doctor", *args]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    # the device operations are covered in-process by test_application_checks_on_this_cpu
    cpu_proc = doctor("--device", "cpu", "--no-app")
    hip_proc = doctor("--device", "hip", "--json")
    cpu_out, _ = cpu_proc.communicate(timeout=120)
    hip_out, _ = hip_proc.communicate(timeout=120)
    assert (
        cpu_proc.returncode == 0 and "verdict [PASS] usable" in cpu_out and "\033[" not in cpu_out
    )
    report = json.loads(hip_out)
    import torch

    if not torch.cuda.is_available():
        assert (
            hip_proc.returncode == 1 and not report["usable"] and "not usable" in report["verdict"]
        )


# ---------------------------------------------------------------- install commands and overrides


def test_every_pip_install_the_doctor_prints_is_pinned(tmp_path):
    fixes = [f for e in KNOWN_ERRORS for f in e.fixes]
    for torch in (Torch(), Torch(cuda="13.0")):  # the wrong build on AMD and on NVIDIA machines
        for amd, nvidia in ((True, False), (False, True)):
            root = tmp_path / f"{amd}{nvidia}{torch.cuda}"
            root.mkdir()
            r = diagnose(machine(root, amd=amd, nvidia=nvidia, torch=torch), "auto", app=False)
            fixes += [c.fix for c in r.checks if c.fix]
    installs = [m for f in fixes for m in re.findall(r"pip install ([^`]+)", f)]
    # the installs of torch itself (not torchvision, amdsmi, an extension being rebuilt)
    installs = [m for m in installs if re.search(r"(^|\s)torch(==|\s|$)", m)]
    assert installs, "no install command found: the test would pass vacuously"

    # pinned, or AMD's per-gfx nightly index (its torch is the index's own build, never PyPI's)
    def pinned_or_amd(spec: str) -> bool:
        index = re.search(r"--index-url (\S+)", spec)
        amd = index is not None and index.group(1) in THEROCK_INDEXES.values()
        return spec.startswith(f"torch=={TORCH_PIN}") or (amd and "--pre torch" in spec)

    assert all(pinned_or_amd(spec) for spec in installs), installs
    assert any(spec.startswith(f"torch=={TORCH_PIN}") for spec in installs)


# ---------------------------------------------------------------- what is set


def test_report_lists_the_environment_in_text_and_json(tmp_path, capsys, monkeypatch):
    env = {"HIP_VISIBLE_DEVICES": "1", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO"}
    r = diagnose(
        machine(tmp_path, environ=env, torch=Torch(hip="6.4", gpus=[RX6800], archs=SHIPPED)),
        "hip",
        app=False,
    )
    assert list(r.environment) == list(ENV_VARS)
    assert {k: v for k, v in r.environment.items() if v is not None} == env
    assert r.to_dict()["environment"]["ROCR_VISIBLE_DEVICES"] is None
    text = format_report(r, colour=False)
    assert "NCCL_SOCKET_IFNAME='eth0'" in text and "HIP_VISIBLE_DEVICES='1'" in text
    not_set = next(line for line in text.splitlines() if "not set:" in line)
    assert "ROCR_VISIBLE_DEVICES" in not_set and "HSA_OVERRIDE_GFX_VERSION" in not_set
    assert "NCCL_DEBUG" not in not_set
    monkeypatch.setenv("NCCL_DEBUG", "WARN")  # the real run reads the real environment
    assert main(["--device", "cpu", "--no-app", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["environment"]["NCCL_DEBUG"] == "WARN"


def test_rocr_visible_devices_warns_that_ray_refuses_it(tmp_path):
    torch = Torch(hip="6.4", gpus=[RX6800], archs=SHIPPED)
    r = diagnose(
        machine(tmp_path, environ={"ROCR_VISIBLE_DEVICES": "0"}, torch=torch), "hip", app=False
    )
    c = by_name(r, "ROCR_VISIBLE_DEVICES and Ray")
    assert c.status == "WARN" and c.layer == "distributed"
    assert "ROCR_VISIBLE_DEVICES='0'" in c.seen and "Ray refuses it" in c.seen
    assert "unset ROCR_VISIBLE_DEVICES" in c.fix and "HIP_VISIBLE_DEVICES" in c.fix
    assert r.usable  # a warning for Ray, not a reason the GPU is unusable


def test_rocr_with_hip_warns_about_the_nesting(tmp_path):
    env = {"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "0"}
    r = diagnose(
        machine(tmp_path, environ=env, torch=Torch(hip="6.4", gpus=[RX6800], archs=SHIPPED)),
        "hip",
        app=False,
    )
    c = by_name(r, "ROCR_VISIBLE_DEVICES and Ray")
    assert c.status == "WARN" and "both set" in c.seen and "unset ROCR_VISIBLE_DEVICES" in c.fix


def test_no_rocr_no_ray_warning(tmp_path):
    r = diagnose(
        machine(tmp_path, torch=Torch(hip="6.4", gpus=[RX6800], archs=SHIPPED)), "hip", app=False
    )
    assert not [c for c in r.checks if c.layer == "distributed"]


def test_hip_and_cuda_visible_devices_that_disagree_warn(tmp_path):
    env = {"HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "1"}
    r = diagnose(
        machine(tmp_path, environ=env, torch=Torch(hip="6.4", gpus=[RX6800], archs=SHIPPED)),
        "hip",
        app=False,
    )
    c = by_name(r, "visibility variables")
    assert c.status == "WARN" and "differ" in c.seen and "Inconsistent values found" in c.fix


@pytest.mark.parametrize(
    ("value", "status", "selected"),
    [
        ("eth0", "PASS", "eth0"),
        ("eth", "PASS", "eth0"),
        ("=eth", "WARN", None),
        ("eth9", "WARN", None),
        ("^docker,lo", "PASS", "eth0"),
    ],
)
def test_nccl_socket_ifname_is_checked_against_this_machine(tmp_path, value, status, selected):
    sys_ = machine(tmp_path, environ={"NCCL_SOCKET_IFNAME": value}, net=("docker0", "eth0", "lo"))
    c = by_name(diagnose(sys_, "cpu", app=False), "NCCL_SOCKET_IFNAME")
    assert c.status == status
    if selected:
        assert c.seen.endswith(f"selects {selected}")
    else:
        assert "docker0, eth0, lo" in c.seen and "NCCL_SOCKET_IFNAME=" in c.fix


def test_interfaces_matching_follows_nccl_syntax():
    names = ["docker0", "eth0", "eth1", "ib0", "lo"]
    assert interfaces_matching("eth", names) == ["eth0", "eth1"]
    assert interfaces_matching("=eth1,ib0", names) == ["eth1", "ib0"]
    assert interfaces_matching("^docker", names) == ["eth0", "eth1", "ib0"]
    assert interfaces_matching("^=eth0", names) == ["docker0", "eth1", "ib0"]


def test_a_gpu_whose_arch_triton_rejects_gets_a_warning_with_the_way_out(monkeypatch):
    """An RX 6800 XT (gfx1030) trains with torch trees: a warning that says so, not a fail."""
    import torch

    from rlamd.doctor import application
    from rlamd.doctor.report import WARN, Report
    from rlamd.replay import segment_tree

    why = "Triton 3.9.0 on gfx1030: RuntimeError: PassManager::run failed"
    monkeypatch.setattr(segment_tree, "triton_unusable", lambda dev: why)
    r = Report("cuda:0")
    application._replay_kernels(r, torch.device("cuda", 0))
    (check,) = r.checks
    assert check.status == WARN and check.seen == why
    assert "RDNA2" in check.fix and "Training works" in check.fix
