"""rlamd.device on fake ROCm, CUDA and CPU-only builds of torch, and on this machine."""

from __future__ import annotations

import pytest
import torch

from rlamd.device import (
    DEFAULT_HIP_ALLOC_CONF,
    DeviceError,
    TorchQueries,
    apply_default_alloc_conf,
    describe_device,
    parse_device_spec,
    resolve_device,
)


class FakeTorch(TorchQueries):
    """Answers torch's device queries like a given build on a given machine."""

    def __init__(self, hip=None, cuda=None, gpus=(), bf16=True):
        self.hip, self.cuda, self.gpus, self.bf16 = hip, cuda, list(gpus), bf16

    def torch_version(self):
        return "2.13.0+rocm7.0" if self.hip else ("2.13.0+cu130" if self.cuda else "2.13.0+cpu")

    def hip_version(self):
        return self.hip

    def cuda_version(self):
        return self.cuda

    def gpu_available(self):
        return bool(self.gpus)

    def device_count(self):
        return len(self.gpus)

    def device_properties(self, index):
        name, arch, mem = self.gpus[index]
        return {"name": name, "arch": arch, "total_memory": mem, "capability": "8.6"}

    def gpu_bf16(self, index):
        return self.bf16

    def mps_available(self):
        return False

    def cpu_bf16(self):
        return False


RX6800 = ("AMD Radeon RX 6800 XT", "gfx1030", 16 * 2**30)
MI300 = ("AMD Instinct MI300X", "gfx942:sramecc+:xnack-", 192 * 2**30)
RTX3080 = ("NVIDIA GeForce RTX 3080", "", 10 * 2**30)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("auto", ("auto", None)),
        ("CPU", ("cpu", None)),
        ("cuda", ("cuda", None)),
        ("cuda:1", ("cuda", 1)),
        ("hip", ("hip", None)),
        ("hip:2", ("hip", 2)),
        ("rocm:0", ("rocm", 0)),
        (" gpu ", ("gpu", None)),
    ],
)
def test_parse_device_spec_accepts_user_spellings(spec, expected):
    assert parse_device_spec(spec) == expected


@pytest.mark.parametrize(
    ("spec", "hint"), [("hipp", "'hip'"), ("cdua", "'cuda'"), ("rcom", "'rocm'")]
)
def test_parse_device_spec_suggests_nearest(spec, hint):
    with pytest.raises(ValueError, match=f"Did you mean {hint}"):
        parse_device_spec(spec)


@pytest.mark.parametrize("spec", ["cpu:0", "hip:x", "auto:1"])
def test_parse_device_spec_rejects_bad_index(spec):
    with pytest.raises(ValueError, match="index"):
        parse_device_spec(spec)


@pytest.mark.parametrize("spec", ["hip", "rocm:0", "cuda", "gpu", "auto"])
def test_rocm_build_maps_every_spelling_to_cuda(spec):
    api = FakeTorch(hip="7.0.51831", gpus=[RX6800])
    assert resolve_device(spec, api=api, environ={}) == torch.device("cuda", 0)


def test_rocm_index_out_of_range_lists_devices():
    api = FakeTorch(hip="7.0", gpus=[RX6800, MI300])
    with pytest.raises(DeviceError) as err:
        resolve_device("hip:2", api=api, environ={})
    msg = str(err.value)
    assert (
        "2 GPU(s) visible" in msg and "0: AMD Radeon RX 6800 XT" in msg and "1: AMD Instinct" in msg
    )
    assert "rlamd.doctor" in msg


def test_cpu_only_build_explains_itself():
    with pytest.raises(DeviceError, match="CPU-only build") as err:
        resolve_device("hip", api=FakeTorch(), environ={})
    assert "--device cpu" in str(err.value) and "rlamd.doctor" in str(err.value)


def test_rocm_build_without_gpu_names_driver_and_override():
    with pytest.raises(DeviceError, match="ROCm/HIP 7.0 build, but it sees no GPU") as err:
        resolve_device("rocm", api=FakeTorch(hip="7.0"), environ={})
    assert "HSA_OVERRIDE_GFX_VERSION" in str(err.value)


def test_visibility_variable_hiding_everything_is_named():
    with pytest.raises(DeviceError, match="HIP_VISIBLE_DEVICES=''"):
        resolve_device("hip", api=FakeTorch(hip="7.0"), environ={"HIP_VISIBLE_DEVICES": ""})


def test_auto_falls_back_to_cpu_without_gpu():
    assert resolve_device("auto", api=FakeTorch(), environ={}) == torch.device("cpu")


def test_alloc_conf_default_set_on_rocm_only_when_user_set_none():
    env: dict[str, str] = {}
    resolve_device("auto", api=FakeTorch(hip="7.0", gpus=[RX6800]), environ=env)
    assert env["PYTORCH_HIP_ALLOC_CONF"] == DEFAULT_HIP_ALLOC_CONF
    user = {"PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True"}
    assert not apply_default_alloc_conf(FakeTorch(hip="7.0"), user)
    assert user["PYTORCH_HIP_ALLOC_CONF"] == "expandable_segments:True"
    cuda_env: dict[str, str] = {}
    resolve_device("auto", api=FakeTorch(cuda="13.0", gpus=[RTX3080]), environ=cuda_env)
    assert "PYTORCH_HIP_ALLOC_CONF" not in cuda_env


def test_describe_rocm_strips_arch_feature_suffixes():
    info = describe_device(torch.device("cuda", 0), api=FakeTorch(hip="7.0.1", gpus=[MI300]))
    assert (info.backend, info.arch, info.hip_version) == ("rocm", "gfx942", "7.0.1")
    assert info.total_memory == 192 * 2**30 and info.bf16
    assert "gfx942" in info.summary() and "HIP 7.0.1" in info.summary()


def test_describe_cuda_reports_sm_arch():
    info = describe_device("cuda:0", api=FakeTorch(cuda="13.0", gpus=[RTX3080], bf16=False))
    assert (info.backend, info.arch, info.hip_version, info.bf16) == ("cuda", "sm_86", None, False)


def test_this_machine_hip_raises_clear_error_or_resolves():
    """On the CI machine (no GPU) asking for hip must fail with the doctor hint."""
    if torch.cuda.is_available():
        assert resolve_device("hip").type == "cuda"
    else:
        with pytest.raises(DeviceError, match="rlamd.doctor"):
            resolve_device("hip")
        assert describe_device(resolve_device("auto")).backend in ("cpu", "mps")
