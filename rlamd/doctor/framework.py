"""The doctor's framework and architecture layers: the PyTorch build, and the card's gfx.

The framework layer asks whether this torch is the right build for the machine and sees the
GPU; the architecture layer whether the torch build ships kernels for the card's gfx name
(or an ``HSA_OVERRIDE_GFX_VERSION`` that borrows another's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rlamd.gfx import kernel_coverage, tensile_archs

from .gfx import FAMILY_OVERRIDES, gfx_for_override
from .install import torch_install_fix
from .layers import Asked
from .report import FAIL, PASS, SKIP, WARN, Report, fix_from_table
from .system import System
from .wheels import OLDEST_HOST, version_tuple

__all__ = ["TorchSeen", "check_architecture", "check_framework"]

_VISIBILITY = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


@dataclass(frozen=True)
class TorchSeen:
    """What the framework layer found out about torch, for the layers after it."""

    hip: str | None
    """torch's HIP version (None unless a ROCm build)."""
    available: bool
    """Whether torch is a GPU build that sees at least one GPU."""
    names: list[str]
    """``"i: name (gfx)"`` for each GPU torch sees."""
    gfx: list[str]
    """The gfx names torch reports for its GPUs (empty on CUDA and CPU builds)."""


def check_framework(
    r: Report, system: System, asked: Asked, rocm: tuple[str, str] | None
) -> TorchSeen:
    """The torch build against the machine, its HIP against the system ROCm, the visibility
    variables, and whether torch sees the GPU.

    Args:
        r: the report to add to.
        system: the machine.
        asked: the device asked for and the GPUs on the bus.
        rocm: the system ROCm from the runtime layer, as ``(version, file)``, or None.
    """
    t = system.torch
    hip, cuda = t.hip_version(), t.cuda_version()
    build = f"ROCm/HIP {hip}" if hip else (f"CUDA {cuda}" if cuda else "CPU-only")
    wheel_fix = torch_install_fix("rocm", rocm[0] if rocm else None)
    _check_build(r, asked, t.torch_version(), (hip, cuda), build, wheel_fix)
    if hip and rocm:
        _check_hip_vs_rocm(r, hip, rocm[0])
    _check_visibility(r, system.environ, asked.wants_gpu)
    available = bool((hip or cuda) and t.gpu_available() and t.device_count() > 0)
    names: list[str] = []
    torch_gfx: list[str] = []
    if available:
        for i in range(t.device_count()):
            props = t.device_properties(i)
            names.append(
                f"{i}: {props['name']}"
                + (f" ({props['arch'].split(':')[0]})" if props.get("arch") else "")
            )
            if props.get("arch"):
                torch_gfx.append(props["arch"].split(":")[0])
        seen = f"{t.device_count()} device(s): {'; '.join(names)}"
        r.add("framework", "torch sees the GPU", PASS, seen)
    else:
        _check_no_gpu_seen(r, asked, hip, cuda, build, wheel_fix)
    return TorchSeen(hip=hip, available=available, names=names, gfx=torch_gfx)


def _check_build(
    r: Report,
    asked: Asked,
    version: str,
    hip_cuda: tuple[str | None, str | None],
    build: str,
    wheel_fix: str,
) -> None:
    hip, cuda = hip_cuda
    if asked.amd and not hip:
        seen = f"torch {version} is a {build} build on an AMD machine"
        r.add("framework", "PyTorch build", FAIL, seen, wheel_fix)
    elif asked.nvidia and not asked.amd and not cuda and asked.wants_gpu:
        seen = f"torch {version} is a {build} build on an NVIDIA machine"
        r.add("framework", "PyTorch build", FAIL, seen, torch_install_fix("cuda"))
    elif asked.kind in ("hip", "rocm") and not hip:
        seen = f"torch {version} is a {build} build; --device {asked.device} needs ROCm"
        r.add("framework", "PyTorch build", FAIL, seen, wheel_fix)
    else:
        r.add("framework", "PyTorch build", PASS, f"torch {version}, {build}")


def _check_hip_vs_rocm(r: Report, hip: str, rocm: str) -> None:
    """A ROCm wheel brings its own runtime; the host's driver must be new enough for it
    (AMD supports driver and user space two releases apart, :mod:`.wheels`)."""
    th, sr = ".".join(hip.split(".")[:2]), ".".join(rocm.split(".")[:2])
    if th == sr:
        r.add("framework", "torch HIP vs system ROCm", PASS, f"both {th}")
        return
    oldest = OLDEST_HOST.get(f"rocm{th}")
    if oldest is None:
        r.add(
            "framework",
            "torch HIP vs system ROCm",
            WARN,
            f"torch built for HIP {th}, system ROCm {sr}",
            "Usually works (the wheel carries its runtime) if the amdgpu driver is new enough; "
            "if GPU calls fail, install the pinned wheel as scripts/setup.sh picks it: "
            f"{torch_install_fix('rocm', rocm)}",
        )
    elif version_tuple(sr) >= version_tuple(oldest):
        seen = f"torch built for HIP {th} runs on the driver of ROCm {sr} ({oldest} or newer)"
        r.add("framework", "torch HIP vs system ROCm", PASS, seen)
    else:
        r.add(
            "framework",
            "torch HIP vs system ROCm",
            WARN,
            f"torch built for HIP {th}, system ROCm {sr}: the wheel needs the amdgpu driver of "
            f"ROCm {oldest} or newer",
            torch_install_fix("rocm", rocm),
        )


def _check_visibility(r: Report, env: Mapping[str, str], wants_gpu: bool) -> None:
    vis = {v: env[v] for v in _VISIBILITY if v in env}
    hiding = [f"{k}={v!r}" for k, v in vis.items() if v.strip() in ("", "-1")]
    if hiding and wants_gpu:
        r.add(
            "framework",
            "visibility variables",
            FAIL,
            f"{', '.join(hiding)} hides every GPU",
            f"Unset it (`unset {hiding[0].split('=')[0]}`) or list the cards to use, e.g. "
            "HIP_VISIBLE_DEVICES=0.",
        )
    elif (
        "HIP_VISIBLE_DEVICES" in vis
        and "CUDA_VISIBLE_DEVICES" in vis
        and vis["HIP_VISIBLE_DEVICES"].strip() != vis["CUDA_VISIBLE_DEVICES"].strip()
    ):
        r.add(
            "framework",
            "visibility variables",
            WARN,
            f"HIP_VISIBLE_DEVICES={vis['HIP_VISIBLE_DEVICES']!r} and "
            f"CUDA_VISIBLE_DEVICES={vis['CUDA_VISIBLE_DEVICES']!r} differ",
            "torch on ROCm follows HIP_VISIBLE_DEVICES, CUDA builds follow CUDA_VISIBLE_DEVICES, "
            "and some Ray releases refuse the mismatch on AMD GPUs ('Inconsistent values "
            "found'): keep one (`unset CUDA_VISIBLE_DEVICES` on ROCm).",
        )
    elif vis:
        seen = ", ".join(f"{k}={v!r}" for k, v in vis.items())
        r.add("framework", "visibility variables", PASS, seen)


def _check_no_gpu_seen(
    r: Report, asked: Asked, hip: str | None, cuda: str | None, build: str, wheel_fix: str
) -> None:
    wants_gpu = asked.wants_gpu
    if hip or cuda:
        status = FAIL if wants_gpu else SKIP
        message = "No HIP GPUs are available" if hip else "torch.cuda.is_available() False"
        r.add(
            "framework",
            "torch sees the GPU",
            status,
            f"{build} build, torch.cuda.is_available() is False",
            fix_from_table(message, "") if status == FAIL else None,
        )
        return
    if not wants_gpu:
        fix = None
    elif asked.amd or asked.kind in ("hip", "rocm"):
        fix = wheel_fix
    else:
        fix = "Install a GPU build of PyTorch."
    status = SKIP if not wants_gpu else FAIL
    r.add("framework", "torch sees the GPU", status, "CPU-only build: CPU only", fix)


def check_architecture(
    r: Report, system: System, asked: Asked, seen: TorchSeen, info_gfx: list[str]
) -> None:
    """Whether this torch ships kernels for each AMD card's gfx, and what the override does.

    Args:
        r: the report to add to.
        system: the machine.
        asked: the device asked for and the GPUs on the bus.
        seen: what the framework layer found.
        info_gfx: the gfx names the runtime layer found (rocminfo or the KFD topology).
    """
    override = system.environ.get("HSA_OVERRIDE_GFX_VERSION")
    if asked.amd and seen.hip:
        t = system.torch
        shipped = t.arch_list() if hasattr(t, "arch_list") else []
        library = t.rocblas_library_dir() if hasattr(t, "rocblas_library_dir") else None
        tensile = tensile_archs(library)
        cards = seen.gfx or info_gfx or system.kfd_gfx()
        for gfx in dict.fromkeys(cards):
            _check_gfx(r, gfx, shipped, override)
            if tensile is not None:
                _check_tensile(r, gfx, tensile, override, str(library))
        if not cards:
            seen_text = "no gfx name found (rocminfo, KFD topology and torch all silent)"
            r.add("architecture", "gfx", SKIP, seen_text)
    elif override and not asked.amd:
        seen_text = f"set to {override} on a machine without an AMD GPU"
        r.add("architecture", "HSA_OVERRIDE_GFX_VERSION", WARN, seen_text, "Unset it.")
    else:
        r.add("architecture", "gfx targets", SKIP, "no AMD GPU with a ROCm build")


def _check_gfx(r: Report, gfx: str, shipped: list[str], override: str | None) -> None:
    supported = gfx in shipped
    targets = ", ".join(shipped) or "unknown"
    if override:
        _check_override(r, gfx, shipped, override)
    elif supported:
        r.add("architecture", gfx, PASS, f"{gfx} is in this torch's targets")
    elif gfx in FAMILY_OVERRIDES:
        r.add(
            "architecture",
            gfx,
            FAIL,
            f"{gfx} is not in this torch's targets ({targets})",
            f"Set `export HSA_OVERRIDE_GFX_VERSION={FAMILY_OVERRIDES[gfx]}` before starting "
            "Python (unofficial: AMD does not support it, but it is how consumer cards of this "
            "family run ROCm).",
        )
    else:
        r.add(
            "architecture",
            gfx,
            FAIL,
            f"{gfx} is not in this torch's targets ({targets})",
            "No known override fits this card: use a PyTorch/ROCm release that lists it.",
        )


def _check_tensile(
    r: Report, gfx: str, tensile: set[str], override: str | None, library: str
) -> None:
    """rocBLAS aborts the process at the first matrix multiply on a gfx it has no Tensile
    files for (``Cannot read ...TensileLibrary.dat: Illegal seek for GPU arch``)."""
    coverage = kernel_coverage(gfx, (), tensile, override)
    name = f"{gfx} rocBLAS kernels"
    if coverage.ok:
        seen = f"Tensile files for {coverage.runs_as} in {library}"
        r.add("architecture", name, PASS, seen)
        return
    seen = (
        f"{coverage.problem()} in {library}: the first matrix multiply would abort the process "
        f"(rocBLAS: Cannot read TensileLibrary.dat for GPU arch {coverage.runs_as})"
    )
    r.add("architecture", name, FAIL, seen, coverage.fix())


def _check_override(r: Report, gfx: str, shipped: list[str], override: str) -> None:
    supported = gfx in shipped
    borrowed = gfx_for_override(override)
    if supported and borrowed == gfx:
        r.add("architecture", gfx, PASS, f"{gfx} is in this torch's targets")
    elif supported:
        r.add(
            "architecture",
            gfx,
            WARN,
            f"{gfx} is supported, yet HSA_OVERRIDE_GFX_VERSION={override} makes it run as "
            f"{borrowed}",
            "Unset HSA_OVERRIDE_GFX_VERSION: this card does not need it.",
        )
    elif borrowed in shipped:
        r.add(
            "architecture",
            gfx,
            WARN,
            f"{gfx} is not in this torch's targets; HSA_OVERRIDE_GFX_VERSION={override} runs "
            f"it as {borrowed}",
            "Unofficial and unsupported by AMD: if kernels crash, try a ROCm wheel that lists "
            "this card.",
        )
    else:
        family = FAMILY_OVERRIDES.get(gfx, "the version of a listed card of the same family")
        r.add(
            "architecture",
            gfx,
            FAIL,
            f"HSA_OVERRIDE_GFX_VERSION={override} ({borrowed}) is not among this torch's "
            "targets either",
            f"Use {family} for {gfx}.",
        )
