"""A Ray learner's device follows the GPU Ray assigned it, on fake ROCm and CUDA builds.

Ray narrows each GPU actor's visibility (HIP_VISIBLE_DEVICES on AMD nodes,
CUDA_VISIBLE_DEVICES on NVIDIA ones) and refuses ROCR_VISIBLE_DEVICES on AMD nodes. The
mapping is checked with fake environments here, against Ray's own code where Ray is
installed, and in a real local Ray actor under ``-m ray``.
"""

from __future__ import annotations

import pytest
import torch

from rlamd.device import (
    DeviceError,
    ray_learner_device,
    ray_visibility_problem,
    resolve_device,
    visible_devices,
)

from .test_device import MI300, RTX3080, RX6800, FakeTorch

ROCM = FakeTorch(hip="6.4.43482", gpus=[RX6800])
CUDA = FakeTorch(cuda="13.0", gpus=[RTX3080])


@pytest.mark.parametrize(
    ("api", "env", "ids", "spec", "expected"),
    [
        # Ray narrowed visibility to the assigned GPU: it is device 0 in the actor.
        (ROCM, {"HIP_VISIBLE_DEVICES": "3"}, ["3"], "cuda", "cuda:0"),
        (ROCM, {"HIP_VISIBLE_DEVICES": "3"}, [3], "hip", "hip:0"),
        (ROCM, {"HIP_VISIBLE_DEVICES": "1"}, ["1"], "auto", "cuda:0"),
        (CUDA, {"CUDA_VISIBLE_DEVICES": "5"}, [5], "cuda", "cuda:0"),
        # ROCm reads CUDA_VISIBLE_DEVICES when HIP_VISIBLE_DEVICES is not set.
        (ROCM, {"CUDA_VISIBLE_DEVICES": "2"}, ["2"], "rocm", "rocm:0"),
        # Equal HIP and CUDA lists are fine.
        (ROCM, {"HIP_VISIBLE_DEVICES": "2", "CUDA_VISIBLE_DEVICES": "2"}, ["2"], "gpu", "cuda:0"),
        # RAY_EXPERIMENTAL_NOSET_*: the actor sees what the node sees; the place in that list.
        (ROCM, {"HIP_VISIBLE_DEVICES": "4,5,6"}, ["6"], "cuda", "cuda:2"),
        (ROCM, {}, ["2"], "cuda", "cuda:2"),
        (CUDA, {}, [1], "cuda", "cuda:1"),
        # Several GPUs per learner: the first one.
        (ROCM, {"HIP_VISIBLE_DEVICES": "6,7"}, ["6", "7"], "cuda", "cuda:0"),
        # ROCR and HIP together: HIP counts within ROCR's list, Ray accepts it.
        (
            ROCM,
            {"ROCR_VISIBLE_DEVICES": "4,5", "HIP_VISIBLE_DEVICES": "1"},
            ["1"],
            "cuda",
            "cuda:0",
        ),
        # ROCR_VISIBLE_DEVICES means nothing to a CUDA build, nor does HIP_VISIBLE_DEVICES.
        (CUDA, {"ROCR_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "1"}, [1], "cuda", "cuda:0"),
        (CUDA, {"HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "1"}, [1], "cuda", "cuda:0"),
        # No GPU from Ray.
        (ROCM, {}, [], "auto", "cpu"),
        (ROCM, {"HIP_VISIBLE_DEVICES": "0"}, [], "cpu", "cpu"),
    ],
)
def test_learner_device_follows_rays_assignment(api, env, ids, spec, expected):
    assert ray_learner_device(spec, ids, environ=env, api=api) == expected


def test_the_spec_resolves_to_the_assigned_gpu():
    env = {"HIP_VISIBLE_DEVICES": "7"}
    api = FakeTorch(hip="6.4", gpus=[MI300])  # the one GPU this actor sees
    spec = ray_learner_device("hip", ["7"], environ=env, api=api)
    assert resolve_device(spec, api=api, environ=env) == torch.device("cuda", 0)


def test_outside_ray_the_spec_is_unchanged():
    assert (
        ray_learner_device("hip:1", None, environ={"ROCR_VISIBLE_DEVICES": "0"}, api=ROCM)
        == "hip:1"
    )


def test_rocr_visible_devices_alone_is_refused_with_what_to_do():
    with pytest.raises(DeviceError) as err:
        ray_learner_device("cuda", ["0"], environ={"ROCR_VISIBLE_DEVICES": "0,1"}, api=ROCM)
    msg = str(err.value)
    assert "ROCR_VISIBLE_DEVICES='0,1' is set" in msg
    assert "unset ROCR_VISIBLE_DEVICES" in msg and "HIP_VISIBLE_DEVICES='0,1'" in msg
    assert "rlamd.doctor" in msg


def test_hip_and_cuda_lists_that_differ_are_refused():
    env = {"HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "0,1"}
    with pytest.raises(DeviceError, match="differ") as err:
        ray_learner_device("cuda", ["0"], environ=env, api=ROCM)
    assert "unset CUDA_VISIBLE_DEVICES" in str(err.value)


def test_gpu_asked_for_but_none_assigned():
    with pytest.raises(DeviceError, match="assigned it no GPU") as err:
        ray_learner_device("hip", [], environ={}, api=ROCM)
    assert "--gpus-per-learner" in str(err.value)


def test_assigned_gpu_missing_from_the_visible_list_is_named():
    with pytest.raises(DeviceError) as err:
        ray_learner_device("cuda", [1], environ={"HIP_VISIBLE_DEVICES": "0"}, api=ROCM)
    assert "GPU '1'" in str(err.value) and "HIP_VISIBLE_DEVICES='0'" in str(err.value)


def test_a_uuid_without_a_visibility_variable_cannot_be_mapped():
    with pytest.raises(DeviceError, match="not an index"):
        ray_learner_device("cuda", ["GPU-1a2b"], environ={}, api=CUDA)


def test_uuids_map_through_the_visible_list():
    env = {"CUDA_VISIBLE_DEVICES": "GPU-aa,GPU-bb"}
    assert ray_learner_device("cuda", ["GPU-bb"], environ=env, api=CUDA) == "cuda:1"


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"ROCR_VISIBLE_DEVICES": "0"}, "ROCR_VISIBLE_DEVICES"),
        ({"ROCR_VISIBLE_DEVICES": ""}, "ROCR_VISIBLE_DEVICES"),
        ({"ROCR_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "0"}, "ROCR_VISIBLE_DEVICES"),
        ({"HIP_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0"}, "CUDA_VISIBLE_DEVICES"),
        ({"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"}, None),
        ({"HIP_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "0,1"}, None),
        ({"CUDA_VISIBLE_DEVICES": "3"}, None),
        ({}, None),
    ],
)
def test_visibility_problems_name_the_variable(env, variable):
    problem = ray_visibility_problem(env, amd=True)
    assert (problem.variable if problem else None) == variable
    assert ray_visibility_problem(env, amd=False) is None  # Ray checks them on AMD nodes only


@pytest.mark.parametrize(
    "env",
    [
        {"ROCR_VISIBLE_DEVICES": "0"},
        {"ROCR_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "1"},
        {"HIP_VISIBLE_DEVICES": "0"},
        {"CUDA_VISIBLE_DEVICES": "0"},
        {},
    ],
)
def test_rocr_check_agrees_with_rays_amd_gpu_support(env, monkeypatch):
    """Where Ray is installed, its AMD GPU manager raises exactly when we say it would."""
    amd_gpu = pytest.importorskip("ray._private.accelerators.amd_gpu")
    for name in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    problem = ray_visibility_problem(env, amd=True)
    ours = problem is not None and problem.variable == "ROCR_VISIBLE_DEVICES"
    try:
        amd_gpu.AMDGPUAcceleratorManager.get_current_process_visible_accelerator_ids()
        theirs = False
    except RuntimeError as exc:
        theirs = "ROCR_VISIBLE_DEVICES" in str(exc)
    assert ours == theirs


@pytest.mark.parametrize(
    "env",
    [
        {"HIP_VISIBLE_DEVICES": "2,3"},
        {"CUDA_VISIBLE_DEVICES": "1"},
        {"HIP_VISIBLE_DEVICES": "3", "CUDA_VISIBLE_DEVICES": "0,1"},
        {"ROCR_VISIBLE_DEVICES": "0,1,2", "HIP_VISIBLE_DEVICES": "2"},
    ],
)
def test_visible_list_is_the_one_torch_on_rocm_uses(env, monkeypatch):
    """torch's own parser (ROCm branch) numbers the same GPUs we do."""
    parse = getattr(torch.cuda, "_parse_visible_devices", None)
    if parse is None:
        pytest.skip("this torch has no _parse_visible_devices")
    for name in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.version, "hip", "6.4.0")
    _, ids = visible_devices(env, rocm=True)
    assert [int(i) for i in ids] == list(parse())


@pytest.mark.ray
def test_in_a_real_ray_task_the_assigned_gpu_is_device_0():
    """Ray with two logical GPUs on this CPU machine narrows each GPU task to its GPU."""
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=1, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:

        @ray.remote(num_gpus=1, num_cpus=0)
        def assigned() -> tuple[list, str | None]:
            import os

            return ray.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES")

        results = ray.get([assigned.remote(), assigned.remote()])
    finally:
        ray.shutdown()
    for ids, visible in results:
        assert len(ids) == 1 and visible == str(ids[0])
        env = {"CUDA_VISIBLE_DEVICES": visible}
        assert ray_learner_device("cuda", ids, environ=env, api=CUDA) == "cuda:0"
