"""The one place where rlamd decides which device to run on (docs/ARCHITECTURE.md).

A ROCm build of PyTorch keeps the device type ``cuda``: ``torch.version.hip`` is what
tells ROCm from CUDA. Users copy ``hip`` and ``rocm`` from ROCm guides, so those
spellings are accepted here and mapped to ``cuda``; nothing else in rlamd branches on
the GPU vendor.

Example:
    >>> from rlamd.device import resolve_device
    >>> resolve_device("cpu")
    device(type='cpu')
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from rlamd.gfx import kernel_coverage, tensile_archs
from rlamd.visibility import RayVisibilityProblem, ray_visibility_problem, visible_devices

__all__ = [
    "DEFAULT_HIP_ALLOC_CONF",
    "DEVICE_HELP",
    "DeviceError",
    "DeviceInfo",
    "KernelCoverageError",
    "RayVisibilityProblem",
    "TorchQueries",
    "amd_machine",
    "apply_default_alloc_conf",
    "describe_device",
    "parse_device_spec",
    "ray_learner_device",
    "ray_visibility_problem",
    "resolve_device",
    "rocm_build",
    "visible_devices",
]

DEFAULT_HIP_ALLOC_CONF = "garbage_collection_threshold:0.6,max_split_size_mb:128"
DEVICE_HELP = (
    "auto, cpu, cuda[:N], hip[:N], rocm[:N] (hip/rocm map to torch's cuda on ROCm; default: auto)"
)
DOCTOR_HINT = "Run `python -m rlamd.doctor` for a full diagnosis and the fix."
_KINDS = ("auto", "cpu", "cuda", "hip", "rocm", "gpu", "mps")
_VISIBILITY_VARS = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


class DeviceError(RuntimeError):
    """A device was asked for that this machine cannot provide."""


class KernelCoverageError(DeviceError):
    """The GPU is there, but this ROCm torch carries no kernels for its gfx: the first
    kernel or matrix multiply would fail or abort the process (rocBLAS, MIOpen)."""


class TorchQueries:
    """Everything rlamd asks torch about devices, behind one object tests can fake."""

    def torch_version(self) -> str:
        return torch.__version__

    def hip_version(self) -> str | None:
        return getattr(torch.version, "hip", None)

    def cuda_version(self) -> str | None:
        return getattr(torch.version, "cuda", None)

    def gpu_available(self) -> bool:
        return torch.cuda.is_available()

    def device_count(self) -> int:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0

    def device_properties(self, index: int) -> dict[str, Any]:
        props = torch.cuda.get_device_properties(index)
        return {
            "name": props.name,
            "arch": getattr(props, "gcnArchName", "") or "",
            "total_memory": int(props.total_memory),
            "capability": f"{props.major}.{props.minor}",
        }

    def arch_list(self) -> list[str]:
        """The gfx/sm targets this torch was compiled for (empty when unknown)."""
        try:
            return list(torch.cuda.get_arch_list())
        except Exception:  # pragma: no cover - builds without the call
            return []

    def rocblas_library_dir(self) -> Path | None:
        """The rocBLAS Tensile folder a ROCm wheel ships (``torch/lib/rocblas/library``)."""
        folder = Path(torch.__file__).parent / "lib" / "rocblas" / "library"
        return folder if folder.is_dir() else None

    def gpu_bf16(self, index: int) -> bool:
        try:
            with torch.cuda.device(index):
                return bool(torch.cuda.is_bf16_supported())
        except Exception:  # pragma: no cover - depends on the driver
            return False

    def mps_available(self) -> bool:
        mps = getattr(torch.backends, "mps", None)
        return bool(mps and mps.is_available())

    def cpu_capability(self) -> str:
        getter = getattr(torch.backends.cpu, "get_cpu_capability", None)
        return getter() if getter else "unknown"

    def cpu_bf16(self) -> bool:
        """True when the CPU has native bf16 arithmetic (AVX-512 BF16 or AMX)."""
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                flags = f.read()
        except OSError:
            return False
        return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


def rocm_build(api: TorchQueries | None = None) -> bool:
    """Whether this torch is a ROCm (HIP) build: its ``cuda`` devices are AMD GPUs."""
    return (api or TorchQueries()).hip_version() is not None


def amd_machine(api: TorchQueries | None = None) -> bool:
    """A ROCm torch, or the AMD GPU driver (``/dev/kfd``) under another torch build."""
    return rocm_build(api) or os.path.exists("/dev/kfd")


@dataclass(frozen=True)
class DeviceInfo:
    """What rlamd found about the device it will run on; logged once at start."""

    device: str
    """The torch device string, e.g. ``cuda:0`` (also on ROCm) or ``cpu``."""
    backend: str
    """``rocm``, ``cuda``, ``mps`` or ``cpu``."""
    name: str
    """Marketing name of the GPU, or the CPU capability for the CPU."""
    arch: str | None
    """gfx architecture on ROCm (``gfx1030``, without ``:sramecc+`` suffixes); ``sm_XY`` on CUDA."""
    torch_version: str
    hip_version: str | None
    cuda_version: str | None
    total_memory: int | None
    """Device memory in bytes (None for the CPU)."""
    device_count: int
    bf16: bool
    """Native bf16 support (decides the ``auto`` precision)."""

    def summary(self) -> str:
        """One human line, e.g. ``rocm cuda:0 AMD Radeon RX 6800 XT gfx1030 16.0 GiB bf16``."""
        where = [self.name] if self.backend == "cpu" else [self.device, self.name]
        parts = [self.backend, *where]
        if self.arch:
            parts.append(self.arch)
        if self.total_memory:
            parts.append(f"{self.total_memory / 2**30:.1f} GiB")
        if self.hip_version:
            parts.append(f"HIP {self.hip_version}")
        elif self.cuda_version and self.backend == "cuda":
            parts.append(f"CUDA {self.cuda_version}")
        parts.append(f"torch {self.torch_version}")
        parts.append("bf16" if self.bf16 else "no native bf16")
        if self.device_count > 1:
            parts.append(f"{self.device_count} GPUs visible")
        return " | ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_device_spec(spec: str | torch.device) -> tuple[str, int | None]:
    """Split a user's device spelling into a kind and an optional index.

    Accepts ``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``hip``, ``hip:N``, ``rocm``,
    ``rocm:N``, ``gpu``, ``gpu:N`` and ``mps`` (case-insensitive).

    Raises:
        ValueError: for anything else, naming the closest accepted spelling.
    """
    if isinstance(spec, torch.device):
        return spec.type, spec.index
    text = str(spec).strip().lower()
    kind, _, index_text = text.partition(":")
    if kind not in _KINDS:
        close = difflib.get_close_matches(kind, _KINDS, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise ValueError(
            f"Unknown device '{spec}'. Accepted: auto, cpu, cuda[:N], hip[:N], rocm[:N], "
            f"gpu[:N], mps.{hint}"
        )
    if not index_text:
        return kind, None
    if kind in ("auto", "cpu", "mps") or not index_text.isdigit():
        raise ValueError(
            f"Bad device index in '{spec}': only cuda, hip, rocm and gpu take an index, "
            "and it must be a whole number such as 'hip:0'."
        )
    return kind, int(index_text)


def _why_no_gpu(api: TorchQueries, environ: MutableMapping[str, str]) -> str:
    hip, cuda = api.hip_version(), api.cuda_version()
    hidden = [f"{v}={environ[v]!r}" for v in _VISIBILITY_VARS if environ.get(v, None) in ("", "-1")]
    if hip is None and cuda is None:
        return (
            f"this PyTorch ({api.torch_version()}) is a CPU-only build. On an AMD GPU install "
            "a ROCm build (see README, 'Installing PyTorch for ROCm'); on NVIDIA a CUDA build."
        )
    build = f"ROCm/HIP {hip}" if hip else f"CUDA {cuda}"
    msg = f"this PyTorch ({api.torch_version()}) is a {build} build, but it sees no GPU"
    if hidden:
        msg += f"; {' and '.join(hidden)} hides every device"
    elif hip:
        msg += (
            " (is the amdgpu driver loaded, is /dev/kfd readable by this user, does the card "
            "need HSA_OVERRIDE_GFX_VERSION?)"
        )
    else:
        msg += " (is the NVIDIA driver installed and loaded?)"
    return msg + "."


def apply_default_alloc_conf(
    api: TorchQueries | None = None, environ: MutableMapping[str, str] | None = None
) -> bool:
    """Set rlamd's default ``PYTORCH_HIP_ALLOC_CONF`` on ROCm unless the user set one.

    It only takes effect before the first GPU allocation, so :func:`resolve_device`
    calls it before touching the GPU. Returns True when the variable was set here.
    """
    environ = os.environ if environ is None else environ
    if not rocm_build(api):
        return False
    if any(environ.get(v) for v in ("PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF")):
        return False
    environ["PYTORCH_HIP_ALLOC_CONF"] = DEFAULT_HIP_ALLOC_CONF
    return True


def resolve_device(
    spec: str | torch.device = "auto",
    *,
    api: TorchQueries | None = None,
    environ: MutableMapping[str, str] | None = None,
) -> torch.device:
    """Turn a user's device spelling into a ``torch.device`` that works here.

    ``auto`` picks GPU 0 when one is usable (ROCm or CUDA), else Apple's ``mps``, else
    the CPU. ``hip``/``rocm`` map to the ``cuda`` device type, which is what ROCm builds
    of PyTorch use.

    Raises:
        ValueError: the spelling is not one we accept.
        DeviceError: a GPU was asked for and none is usable, or the index is out of range;
            the message says what was found and points to ``python -m rlamd.doctor``.
        KernelCoverageError: the ROCm GPU it would pick (``auto`` too) has no kernels in
            this torch: the fix is said here, before a kernel fails or rocBLAS aborts.
    """
    api = api or TorchQueries()
    environ = os.environ if environ is None else environ
    kind, index = parse_device_spec(spec)
    if kind == "cpu":
        return torch.device("cpu")
    apply_default_alloc_conf(api, environ)
    if kind == "mps":
        if not api.mps_available():
            raise DeviceError(f"Device '{spec}' asked for, but Apple MPS is not available here.")
        return torch.device("mps")
    gpu_ok = api.gpu_available() and api.device_count() > 0
    if kind == "auto":
        if gpu_ok:
            _check_kernels(api, environ, 0)
            return torch.device("cuda", 0)
        return torch.device("mps") if api.mps_available() else torch.device("cpu")
    # kind is cuda / hip / rocm / gpu
    if not gpu_ok:
        raise DeviceError(
            f"Device '{spec}' asked for, but no GPU is usable: {_why_no_gpu(api, environ)} "
            f"Use --device cpu to run on the CPU. {DOCTOR_HINT}"
        )
    count = api.device_count()
    index = 0 if index is None else index
    if index >= count:
        names = ", ".join(f"{i}: {api.device_properties(i)['name']}" for i in range(count))
        raise DeviceError(
            f"Device '{spec}' is out of range: {count} GPU(s) visible ({names}). "
            f"Use an index from 0 to {count - 1}, or check HIP_VISIBLE_DEVICES / "
            f"CUDA_VISIBLE_DEVICES. {DOCTOR_HINT}"
        )
    _check_kernels(api, environ, index)
    return torch.device("cuda", index)


def _check_kernels(api: TorchQueries, environ: Mapping[str, str], index: int) -> None:
    """Refuse a ROCm GPU this torch has no kernels for, before the first kernel aborts.

    Raises:
        KernelCoverageError: the wheel's arch list or its rocBLAS Tensile files lack the
            card's gfx (``RLAMD_SKIP_KERNEL_CHECK=1`` skips the check).
    """
    if api.hip_version() is None or environ.get("RLAMD_SKIP_KERNEL_CHECK", "") not in ("", "0"):
        return
    props = api.device_properties(index)
    if not props.get("arch"):
        return
    coverage = kernel_coverage(
        props["arch"],
        api.arch_list(),
        tensile_archs(api.rocblas_library_dir()),
        environ.get("HSA_OVERRIDE_GFX_VERSION"),
    )
    if not coverage.ok:
        raise KernelCoverageError(
            f"{props.get('name', 'the GPU')} at cuda:{index}, {coverage.problem()}. The first "
            "GPU kernel would fail (hipErrorNoBinaryForGpu) or rocBLAS would abort the process. "
            f"Fix: {coverage.fix()} Set RLAMD_SKIP_KERNEL_CHECK=1 to try anyway. {DOCTOR_HINT}"
        )


def _clean_arch(arch: str) -> str:
    """``gfx90a:sramecc+:xnack-`` -> ``gfx90a``."""
    return arch.split(":", 1)[0].strip()


def describe_device(device: torch.device | str, *, api: TorchQueries | None = None) -> DeviceInfo:
    """Report what ``device`` is: backend, versions, name, gfx arch, memory, bf16."""
    api = api or TorchQueries()
    device = torch.device(device) if isinstance(device, str) else device
    hip, cuda = api.hip_version(), api.cuda_version()
    count = api.device_count() if device.type == "cuda" else 0
    if device.type == "cuda":
        index = device.index or 0
        props = api.device_properties(index)
        if hip:
            backend, arch = "rocm", _clean_arch(props.get("arch", "")) or None
        else:
            backend, arch = "cuda", f"sm_{props.get('capability', '?').replace('.', '')}"
        return DeviceInfo(
            device=f"cuda:{index}",
            backend=backend,
            name=props["name"],
            arch=arch,
            torch_version=api.torch_version(),
            hip_version=hip,
            cuda_version=cuda,
            total_memory=props.get("total_memory"),
            device_count=count,
            bf16=api.gpu_bf16(index),
        )
    if device.type == "mps":
        return DeviceInfo(
            "mps", "mps", "Apple GPU", None, api.torch_version(), None, None, None, 1, False
        )
    return DeviceInfo(
        device="cpu",
        backend="cpu",
        name=f"CPU ({api.cpu_capability()}, {os.cpu_count()} cores)",
        arch=None,
        torch_version=api.torch_version(),
        hip_version=hip,
        cuda_version=cuda,
        total_memory=None,
        device_count=0,
        bf16=api.cpu_bf16(),
    )


# ---------------------------------------------------------------------- Ray learners
# How Ray sets the visibility variables, and which settings it refuses: rlamd/visibility.py.


def ray_learner_device(
    device_spec: str,
    gpu_ids: Sequence[int | str] | None,
    *,
    environ: Mapping[str, str] | None = None,
    api: TorchQueries | None = None,
) -> str:
    """The device a Ray learner actor runs on (a spec for :func:`resolve_device`, e.g.
    ``cuda:0``, ``hip:1``, ``cpu``): the torch index of the GPU Ray assigned it. Ray narrows each GPU actor's visibility to its GPU(s), so that is usually ``cuda:0``;
    with ``RAY_EXPERIMENTAL_NOSET_*_VISIBLE_DEVICES`` it is the GPU's place in the visible
    list (or its id). A learner given several GPUs uses the first; Ray picks the GPU.

    Args:
        device_spec: what the driver chose for learners (``cuda``, ``hip``, ``auto``, ``cpu``;
            see ``rlamd.distributed.plan.learner_device_spec``).
        gpu_ids: ``ray.get_gpu_ids()`` inside the actor; None when not running under Ray,
            which returns ``device_spec`` unchanged.
        environ: the actor's environment (default: ``os.environ``).
        api: torch queries (default: the real torch); only the build (ROCm or not) is read.

    Raises:
        DeviceError: Ray's visibility variables are set in a way Ray refuses (see
            :func:`ray_visibility_problem`), a GPU device was asked for but Ray assigned none,
            or the assigned GPU is not among the visible ones.
    """
    if gpu_ids is None:
        return device_spec
    environ = os.environ if environ is None else environ
    kind, _ = parse_device_spec(device_spec)
    if not gpu_ids or kind in ("cpu", "mps"):
        if kind in ("auto", "cpu", "mps"):
            return "cpu" if kind == "auto" else kind
        raise DeviceError(
            f"The learner was asked to run on '{device_spec}', but Ray assigned it no GPU. Give "
            "learners a GPU (--gpus-per-learner 1, or a fraction such as 0.5) or use --device cpu."
        )
    rocm = rocm_build(api)
    problem = ray_visibility_problem(environ, amd=rocm)
    if problem:
        raise DeviceError(f"{problem} {DOCTOR_HINT}")
    index = _assigned_index(str(gpu_ids[0]).strip(), environ, rocm=rocm)
    return f"{'cuda' if kind in ('auto', 'gpu') else kind}:{index}"


def _assigned_index(first: str, environ: Mapping[str, str], *, rocm: bool) -> int:
    """The torch index of the GPU Ray assigned (``first`` of ``ray.get_gpu_ids()``).

    Raises:
        DeviceError: the id cannot be mapped to a visible GPU.
    """
    visible = visible_devices(environ, rocm=rocm)
    if visible is None:
        if not first.isdigit():
            raise DeviceError(
                f"Ray assigned GPU {first!r}, which is not an index, and no visibility variable "
                "maps it to one; let Ray set HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES (unset "
                f"RAY_EXPERIMENTAL_NOSET_*_VISIBLE_DEVICES). {DOCTOR_HINT}"
            )
        return int(first)
    name, ids = visible
    if first in ids:
        return ids.index(first)
    raise DeviceError(
        f"Ray assigned this learner GPU {first!r}, but {name}={','.join(ids)!r} does not "
        f"list it. Do not set {name} inside the job; set it before `ray start` on the node, "
        f"or not at all, and let Ray assign GPUs. {DOCTOR_HINT}"
    )
