"""The device is decided in one place (docs/ARCHITECTURE.md, rule 1): only rlamd/device.py
asks torch which vendor's build it is; everything else asks rlamd.device."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from rlamd import device, precision
from rlamd.replay import segment_tree

ROOT = Path(__file__).resolve().parents[1]
VENDOR = re.compile(r"version\.hip|version, \"hip\"|gcnArchName|/dev/kfd")
TOOLS = ("rlamd/doctor/", "rlamd/bench/")
"""The doctor and the bench report what the machine is; they may read it directly."""


def test_only_the_device_module_branches_on_the_vendor():
    found = []
    for folder in ("rlamd", "agents", "envs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "rlamd/device.py" or rel.startswith(TOOLS):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if VENDOR.search(line):
                    found.append(f"{rel}:{number}: {line.strip()}")
    assert found == []


class _Build(device.TorchQueries):
    def __init__(self, hip: str | None) -> None:
        self.hip = hip

    def hip_version(self) -> str | None:
        return self.hip


def test_rocm_build_and_amd_machine_read_the_build(monkeypatch):
    assert device.rocm_build(_Build("6.4.1")) and not device.rocm_build(_Build(None))
    monkeypatch.setattr(device.os.path, "exists", lambda p: p == "/dev/kfd")
    assert device.amd_machine(_Build(None))  # an AMD driver under a CUDA/CPU torch
    monkeypatch.setattr(device.os.path, "exists", lambda p: False)
    assert not device.amd_machine(_Build(None)) and device.amd_machine(_Build("6.4.1"))


@pytest.mark.parametrize("rocm", [False, True])
def test_tf32_sets_the_hipblaslt_variable_on_rocm_builds_only(monkeypatch, rocm):
    monkeypatch.setattr(precision, "rocm_build", lambda: rocm)
    monkeypatch.delenv("HIPBLASLT_ALLOW_TF32", raising=False)
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        assert precision.configure_tf32(True, torch.device("cuda")) is True
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    assert (device.os.environ.get("HIPBLASLT_ALLOW_TF32") == "1") is rocm
    monkeypatch.delenv("HIPBLASLT_ALLOW_TF32", raising=False)


def test_the_tree_names_an_architecture_through_the_device_module(monkeypatch):
    assert segment_tree._arch(torch.device("cpu")) == "cpu"  # no GPU: the device type
    seen = []

    def fake(dev):
        seen.append(dev)
        return device.DeviceInfo("cuda:0", "rocm", "GPU", "gfx1030", "2", "6", None, 1, 1, True)

    monkeypatch.setattr(segment_tree, "describe_device", fake)
    assert segment_tree._arch(torch.device("cuda", 0)) == "gfx1030"
    assert seen == [torch.device("cuda", 0)]
