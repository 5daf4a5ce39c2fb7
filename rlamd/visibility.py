"""GPU visibility variables and what Ray makes of them; pure functions of an environment.

What Ray does with these variables (Ray 2.45 and later, read in Ray 2.60's
``ray/_private/accelerators/amd_gpu.py``): on a node with AMD GPUs it gives each GPU actor its
GPU(s) through HIP_VISIBLE_DEVICES, and raises "Please use HIP_VISIBLE_DEVICES instead of
ROCR_VISIBLE_DEVICES" when ROCR_VISIBLE_DEVICES is set without HIP_VISIBLE_DEVICES (already
at ``import ray``, which records the visible GPUs, so also at ``ray start`` and in each
worker). Some releases also raise "Inconsistent values found" when HIP_VISIBLE_DEVICES and
CUDA_VISIBLE_DEVICES differ. On NVIDIA nodes Ray sets CUDA_VISIBLE_DEVICES. A ROCm build of
torch applies ROCR_VISIBLE_DEVICES first, then HIP_VISIBLE_DEVICES (preferred) or
CUDA_VISIBLE_DEVICES to number the GPUs it sees from 0.

Nothing here imports torch or Ray; :func:`rlamd.device.ray_learner_device` builds on it, and
:mod:`rlamd.device` re-exports these names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["RayVisibilityProblem", "ray_visibility_problem", "visible_devices"]


@dataclass(frozen=True)
class RayVisibilityProblem:
    """A GPU visibility setting Ray refuses, said for a user."""

    variable: str
    """The variable at fault: ``ROCR_VISIBLE_DEVICES`` or ``CUDA_VISIBLE_DEVICES``."""
    seen: str
    """What is set and what Ray does with it."""
    fix: str
    """What to do instead."""

    def __str__(self) -> str:
        return f"{self.seen}. {self.fix}"


def ray_visibility_problem(
    environ: Mapping[str, str], *, amd: bool = True
) -> RayVisibilityProblem | None:
    """What Ray would refuse in this process's GPU visibility variables, or None.

    Args:
        environ: the environment of the process that starts or joins Ray (or of an actor).
        amd: whether this node has AMD GPUs (or a ROCm build of torch); Ray only checks
            these variables on AMD nodes.
    """
    if not amd:
        return None
    rocr, hip, cuda = (
        environ.get(v)
        for v in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    )
    if rocr is not None and hip is None:
        return RayVisibilityProblem(
            "ROCR_VISIBLE_DEVICES",
            f"ROCR_VISIBLE_DEVICES={rocr!r} is set, and Ray refuses it on AMD GPUs "
            "('Please use HIP_VISIBLE_DEVICES instead of ROCR_VISIBLE_DEVICES')",
            "Unset it on this node (`unset ROCR_VISIBLE_DEVICES`, then restart `ray start`) and "
            "let Ray give each learner its GPU; to limit the cards a node offers, start Ray there "
            f"with HIP_VISIBLE_DEVICES={rocr!r} instead.",
        )
    if hip is not None and cuda is not None and hip.strip() != cuda.strip():
        return RayVisibilityProblem(
            "CUDA_VISIBLE_DEVICES",
            f"HIP_VISIBLE_DEVICES={hip!r} and CUDA_VISIBLE_DEVICES={cuda!r} differ: torch on "
            "ROCm follows HIP_VISIBLE_DEVICES, and some Ray releases refuse the mismatch on AMD "
            "GPUs ('Inconsistent values found')",
            "Keep one: `unset CUDA_VISIBLE_DEVICES`.",
        )
    return None


def visible_devices(environ: Mapping[str, str], *, rocm: bool) -> tuple[str, list[str]] | None:
    """The variable that numbers this process's GPUs from 0, and the ids it lists.

    On ROCm that is HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES (ROCR_VISIBLE_DEVICES,
    applied before them, is not renumbered by Ray); on CUDA, CUDA_VISIBLE_DEVICES. None when
    no such variable is set: every GPU is visible, numbered as on the machine.
    """
    names = ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES") if rocm else ("CUDA_VISIBLE_DEVICES",)
    for name in names:
        value = environ.get(name)
        if value is not None:
            return name, [part.strip() for part in value.split(",") if part.strip()]
    return None
