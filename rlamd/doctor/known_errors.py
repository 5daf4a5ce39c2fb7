"""Errors people meet running PyTorch on AMD GPUs, with their usual causes and fixes.

One table serves ``python -m rlamd.doctor --explain "<message>"``, the doctor's failed
checks, and ``rlamd.train`` when a GPU error stops training.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KNOWN_ERRORS", "KnownError", "explain", "format_explanation"]

ROCM_WHEELS = "https://download.pytorch.org/whl/rocm6.4"


@dataclass(frozen=True)
class KnownError:
    key: str
    title: str
    patterns: tuple[str, ...]
    """Regular expressions (case-insensitive) that identify the error in a message or log."""
    causes: tuple[str, ...]
    fixes: tuple[str, ...]

    def matches(self, text: str) -> bool:
        return any(re.search(p, text, re.IGNORECASE) for p in self.patterns)


KNOWN_ERRORS: tuple[KnownError, ...] = (
    KnownError(
        "no_binary_for_gpu",
        "No kernels for this GPU's architecture (hipErrorNoBinaryForGpu)",
        (
            r"hipErrorNoBinaryForGpu",
            r"no kernel image is available",
            r"invalid device function",
            r"HIP error: invalid device function",
        ),
        (
            "The PyTorch wheel was not built for your GPU's gfx architecture (common on consumer "
            "Radeon cards such as gfx1031/gfx1032/gfx1101/gfx1102/gfx1103).",
        ),
        (
            "Run `python -m rlamd.doctor` to see your gfx name and the architectures your torch ships.",
            "For an unlisted consumer card set the override of its family before starting Python, e.g. "
            "`export HSA_OVERRIDE_GFX_VERSION=10.3.0` (RDNA2, gfx103x) or `=11.0.0` (RDNA3, gfx110x); "
            "this is unofficial and unsupported by AMD.",
            f"Or install a ROCm wheel that lists your gfx: `pip install torch --index-url {ROCM_WHEELS}`.",
        ),
    ),
    KnownError(
        "out_of_memory",
        "GPU out of memory",
        (r"HIP out of memory", r"CUDA out of memory", r"OutOfMemoryError", r"hipErrorOutOfMemory"),
        (
            "The model, batch or replay buffer does not fit in the GPU's free memory.",
            "Other processes hold GPU memory; fragmentation leaves no large free block.",
        ),
        (
            "Lower the batch size or the replay size: `--set dqn.buffer_size=200000` (7 GB per 1M Atari transitions).",
            "See what holds memory with `rocm-smi --showmemuse` or `amd-smi metric -m`.",
            "Reduce fragmentation: `export PYTORCH_HIP_ALLOC_CONF=expandable_segments:True` before starting.",
        ),
    ),
    KnownError(
        "hsa_out_of_resources",
        "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        (r"HSA_STATUS_ERROR_OUT_OF_RESOURCES",),
        (
            "The ROCm runtime could not create queues or map memory: usually no read/write access to "
            "/dev/kfd or /dev/dri/renderD*, or too many processes sharing one GPU.",
        ),
        (
            "Add yourself to the render and video groups: `sudo usermod -aG render,video $USER`, then log in again.",
            "Run fewer GPU processes per card (e.g. fewer Ray learners with fractional GPUs).",
            "Inside containers pass `--device=/dev/kfd --device=/dev/dri --group-add render`.",
        ),
    ),
    KnownError(
        "collective_timeout",
        "RCCL/NCCL communication timeout",
        (
            r"(RCCL|NCCL).*time(d)? ?out",
            r"Watchdog caught collective operation timeout",
            r"ProcessGroupNCCL.*[Tt]imeout",
            r"collective operation timeout",
        ),
        (
            "Learners could not reach each other (firewall, wrong network interface) or one process "
            "died or is stuck, so the others wait on an all-reduce.",
        ),
        (
            "Choose the interface: `export NCCL_SOCKET_IFNAME=eth0` (RCCL reads the NCCL_ variables).",
            "See what happens: `export NCCL_DEBUG=INFO`.",
            "Check every learner started and sees its GPU (`HIP_VISIBLE_DEVICES` set by Ray).",
        ),
    ),
    KnownError(
        "no_hip_gpus",
        "No HIP GPUs are available",
        (r"No HIP GPUs are available", r"no ROCm-capable device", r"hipErrorNoDevice"),
        (
            "The ROCm runtime found no usable GPU: driver not loaded, no access to /dev/kfd, a "
            "visibility variable hiding every GPU, or an unsupported card.",
        ),
        (
            "Run `python -m rlamd.doctor` for the layer that fails.",
            "Unset HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES if they are empty or -1.",
            "Add yourself to the render and video groups: `sudo usermod -aG render,video $USER`.",
        ),
    ),
    KnownError(
        "cuda_not_available",
        "torch.cuda.is_available() is False",
        (
            r"torch\.cuda\.is_available\(\)\s*(is|returns|==)?\s*False",
            r"is_available\(\) (returns )?False",
            r"Torch not compiled with CUDA enabled",
            r"Found no NVIDIA driver",
        ),
        (
            "A CPU-only or CUDA build of PyTorch on an AMD machine (the most common mistake), or the "
            "ROCm build cannot reach the GPU (driver, permissions, visibility variables).",
        ),
        (
            f"Install a ROCm build: `pip uninstall torch && pip install torch --index-url {ROCM_WHEELS}` "
            "(or `RLAMD_TORCH=rocm bash scripts/setup.sh`). `python -c 'import torch; print(torch.version.hip)'` must not print None.",
            "Run `python -m rlamd.doctor` to find the failing layer.",
        ),
    ),
    KnownError(
        "invalid_ordinal",
        "Invalid device ordinal",
        (
            r"invalid device ordinal",
            r"hipErrorInvalidDevice",
            r"CUDA error: invalid device ordinal",
        ),
        (
            "The device index is not below the number of GPUs this process sees (visibility variables "
            "renumber devices from 0).",
        ),
        (
            "Use an index the doctor lists (`--device hip:0` ...).",
            "With HIP_VISIBLE_DEVICES=2 the card is `hip:0` inside the process.",
        ),
    ),
    KnownError(
        "kfd_permission",
        "Cannot open /dev/kfd",
        (
            r"/dev/kfd.*(Permission denied|not permitted)",
            r"Unable to open /dev/kfd",
            r"amdgpu.*permission",
        ),
        ("This user may not open the ROCm kernel driver's device files.",),
        (
            "`sudo usermod -aG render,video $USER`, then log out and in (or `newgrp render`).",
            "In a container: `--device=/dev/kfd --device=/dev/dri --group-add render`.",
        ),
    ),
    KnownError(
        "missing_libs",
        "ROCm libraries not found",
        (
            r"libamdhip64\.so.*cannot open shared object",
            r"librocm.*\.so.*cannot open shared object",
            r"libhsa-runtime64\.so.*cannot open",
        ),
        (
            "A ROCm build of PyTorch is installed but its runtime libraries are missing or mixed with "
            "another ROCm install.",
        ),
        (
            f"Reinstall torch from the ROCm index in a clean virtualenv: `pip install torch --index-url {ROCM_WHEELS}`.",
            "Do not mix LD_LIBRARY_PATH entries of several ROCm versions.",
        ),
    ),
    KnownError(
        "memory_access_fault",
        "Memory access fault by GPU",
        (
            r"Memory access fault by GPU node",
            r"hipErrorIllegalAddress",
            r"an illegal memory access",
        ),
        (
            "A kernel touched memory it does not own: often an HSA_OVERRIDE_GFX_VERSION that does not fit "
            "the card, an old kernel driver, or a bug.",
        ),
        (
            "Check the override matches the card's family (`python -m rlamd.doctor`).",
            "Find the failing kernel with `AMD_SERIALIZE_KERNEL=3` (or `CUDA_LAUNCH_BLOCKING=1` on NVIDIA).",
            "Update the amdgpu kernel driver to the one your ROCm release lists.",
        ),
    ),
    KnownError(
        "hip_version_mismatch",
        "HIP runtime/driver version mismatch",
        (
            r"hipErrorInsufficientDriver",
            r"driver version is insufficient",
            r"HIP runtime version.*mismatch",
        ),
        ("The kernel driver is older than the ROCm runtime PyTorch was built against.",),
        (
            "Update the amdgpu driver, or install a PyTorch wheel built for your ROCm (rocmX.Y index).",
        ),
    ),
)


def explain(text: str) -> list[KnownError]:
    """Every table row whose patterns match ``text`` (a pasted error or log)."""
    return [e for e in KNOWN_ERRORS if e.matches(text)]


def format_explanation(err: KnownError) -> str:
    lines = [f"{err.title}", "  likely causes:"]
    lines += [f"    - {c}" for c in err.causes]
    lines.append("  fixes:")
    lines += [f"    - {f}" for f in err.fixes]
    return "\n".join(lines)
