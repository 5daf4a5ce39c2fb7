"""Errors people meet running PyTorch on AMD GPUs, with their usual causes and fixes.

One table serves ``python -m rlamd.doctor --explain "<message>"``, the doctor's failed
checks, and ``rlamd.train`` when a GPU error stops training.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .gfx import OVERRIDE_RULE
from .install import torch_install_fix

__all__ = ["KNOWN_ERRORS", "KnownError", "explain", "format_explanation"]

ROCM_FIX = torch_install_fix("rocm")
OVERRIDE_FIX = (
    f"For a consumer card AMD does not list, set its family's override before starting Python: "
    f"{OVERRIDE_RULE}. Find your gfx name with `rocminfo | grep gfx` or `python -m rlamd.doctor`. "
    "This is unofficial and unsupported by AMD; a card the wheel lists needs no override."
)


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
            "Run `python -m rlamd.doctor` to see your gfx name and the architectures your torch "
            "ships.",
            OVERRIDE_FIX,
            "Or install a pinned ROCm wheel whose targets list your gfx (`python -c 'import "
            "torch; print(torch.cuda.get_arch_list())'` shows them; for another ROCm release give "
            "scripts/setup.sh `RLAMD_TORCH_INDEX_URL=https://download.pytorch.org/whl/rocmX.Y`). "
            f"{ROCM_FIX}",
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
            "Lower the batch size or the replay size: `--set dqn.buffer_size=200000` (7 GB per 1M "
            "Atari transitions).",
            "See what holds memory with `rocm-smi --showmemuse` or `amd-smi metric -m`.",
            "Reduce fragmentation: `export PYTORCH_HIP_ALLOC_CONF=expandable_segments:True` before "
            "starting.",
        ),
    ),
    KnownError(
        "hsa_out_of_resources",
        "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        (r"HSA_STATUS_ERROR_OUT_OF_RESOURCES",),
        (
            "The ROCm runtime could not create queues or map memory: usually no read/write access "
            "to /dev/kfd or /dev/dri/renderD*, or too many processes sharing one GPU.",
        ),
        (
            "Add yourself to the render and video groups: `sudo usermod -aG render,video $USER`, "
            "then log in again.",
            "Run fewer GPU processes per card (e.g. fewer Ray learners with fractional GPUs).",
            "Inside containers pass `--device=/dev/kfd --device=/dev/dri --group-add render`.",
        ),
    ),
    KnownError(
        "collective_timeout",
        "RCCL/NCCL communication error or timeout between learners",
        (
            r"(RCCL|NCCL).*time(d)? ?out",
            r"Watchdog caught collective operation timeout",
            r"ProcessGroupNCCL.*[Tt]imeout",
            r"collective operation timeout",
            r"\bNCCL error\b",
            r"nccl(System|Remote|Internal)Error",
            r"NCCL WARN .*(Connect|[Ss]ocket|[Nn]et)",
            r"DistStoreError.*Timed out",
            r"Timed out .*waiting for clients",
            r"Timed out initializing process group",
        ),
        (
            "The learners cannot reach each other: RCCL (which reads the NCCL_ variables) picked "
            "the wrong network interface (docker0, a VPN, lo), or a firewall blocks the ports "
            "between the nodes.",
            "One learner died, hangs or is far slower (its node was lost, it ran out of memory, "
            "it never got its GPU), so the others wait on an all-reduce or on the process-group "
            "setup until ray.group_timeout_s (300 s by default) runs out.",
        ),
        (
            "Name the interface that carries the nodes' addresses, on every node before `ray "
            "start`: `export NCCL_SOCKET_IFNAME=eth0` (your name from `ip -br addr`; `^docker0,lo` "
            "excludes instead); CPU learners use gloo: `export GLOO_SOCKET_IFNAME=eth0`.",
            "See what RCCL does: `export NCCL_DEBUG=INFO` (and `NCCL_DEBUG_SUBSYS=INIT,NET`) on "
            "every node, restart `ray start`, and read in the job's log which interface and "
            "transport each rank picked and which connection failed.",
            "Open the firewall between the nodes: the process-group port the run logs "
            "(`torch.distributed nccl group of N at ADDR:PORT`) and the TCP ports RCCL opens on "
            "its own; allow all TCP between the cluster's nodes.",
            "Check every learner is alive and sees its GPU: `ray status`, the job's log, and "
            "`python -m rlamd.doctor` on each node (Ray sets HIP_VISIBLE_DEVICES for each "
            "learner; ROCR_VISIBLE_DEVICES must not be set).",
            "If a learner legitimately needs longer (a slow first step, a large replay to fill), "
            "wait longer: `--set ray.group_timeout_s=900`.",
        ),
    ),
    KnownError(
        "no_hip_gpus",
        "No HIP GPUs are available",
        (r"No HIP GPUs are available", r"no ROCm-capable device", r"hipErrorNoDevice"),
        (
            "A consumer Radeon card this ROCm release does not list (the most common cause on "
            "Radeon cards): the runtime skips it, or sees it and fails later with "
            "hipErrorNoBinaryForGpu, unless HSA_OVERRIDE_GFX_VERSION names its family's listed "
            "ISA.",
            "The ROCm runtime cannot reach the GPU: driver not loaded, no access to /dev/kfd, or a "
            "visibility variable hiding every GPU.",
        ),
        (
            OVERRIDE_FIX,
            "Run `python -m rlamd.doctor` for the layer that fails.",
            "Unset HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES if they are "
            "empty or -1.",
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
            "A CPU-only or CUDA build of PyTorch on an AMD machine (the most common mistake), or "
            "the ROCm build cannot reach the GPU (driver, permissions, visibility variables).",
        ),
        (
            f"{ROCM_FIX} Then `python -c 'import torch; print(torch.version.hip)'` must not print "
            "None.",
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
            "The device index is not below the number of GPUs this process sees (visibility "
            "variables renumber devices from 0).",
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
            "A ROCm build of PyTorch is installed but its runtime libraries are missing or mixed "
            "with another ROCm install.",
        ),
        (
            f"Reinstall torch in a clean virtualenv. {ROCM_FIX}",
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
            "A kernel touched memory it does not own: often an HSA_OVERRIDE_GFX_VERSION that does "
            "not fit the card, an old kernel driver, or a bug.",
        ),
        (
            "Check the override matches the card's family (`python -m rlamd.doctor`).",
            "Find the failing kernel with `AMD_SERIALIZE_KERNEL=3` (or `CUDA_LAUNCH_BLOCKING=1` on "
            "NVIDIA).",
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
            "Update the amdgpu driver, or install a PyTorch wheel built for your ROCm (rocmX.Y "
            "index).",
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
