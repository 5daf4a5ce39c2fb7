"""The doctor's lower layers, one function each: hardware, driver, runtime.

Each function appends its checks to a :class:`~rlamd.doctor.report.Report`. On NVIDIA and
CPU-only machines nothing AMD-specific FAILs: missing AMD parts are SKIPs there.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlamd.device import parse_device_spec

from .report import FAIL, PASS, SKIP, WARN, Report, fix_from_table
from .system import AMD, NVIDIA, GpuOnBus, System

__all__ = ["Asked", "check_driver", "check_hardware", "check_runtime"]

_GROUP_FIX = (
    "Add yourself to the render and video groups: `sudo usermod -aG render,video $USER`, "
    "then log in again."
)


@dataclass(frozen=True)
class Asked:
    """The device asked for, and the GPUs on the machine's bus: what every layer weighs."""

    device: str
    """The user's spelling, e.g. ``auto`` or ``hip:1``."""
    kind: str
    """The spelling's kind: ``auto``, ``cpu``, ``cuda``, ``hip``, ``rocm``, ``gpu`` or ``mps``."""
    index: int
    """The GPU index asked for (0 when none was given)."""
    gpus: list[GpuOnBus]
    """Every GPU on the PCI bus."""
    amd: list[GpuOnBus]
    """The AMD ones."""
    nvidia: list[GpuOnBus]
    """The NVIDIA ones."""
    wants_amd: bool
    """Whether an AMD GPU is asked for (explicitly, or by ``auto``/``gpu`` on an AMD machine)."""
    wants_gpu: bool
    """Whether any GPU is asked for (explicitly, or by ``auto`` on a machine with one)."""

    @classmethod
    def of(cls, system: System, device: str) -> Asked:
        """Read the bus of ``system`` and weigh it against ``device``.

        Raises:
            ValueError: ``device`` is not a spelling rlamd accepts.
        """
        kind, index = parse_device_spec(device)
        gpus = system.gpus_on_bus()
        amd = [g for g in gpus if g.vendor == AMD]
        nvidia = [g for g in gpus if g.vendor == NVIDIA]
        return cls(
            device=device,
            kind=kind,
            index=index or 0,
            gpus=gpus,
            amd=amd,
            nvidia=nvidia,
            wants_amd=kind in ("hip", "rocm") or (kind in ("auto", "gpu") and bool(amd)),
            wants_gpu=kind in ("cuda", "hip", "rocm", "gpu") or (kind == "auto" and bool(gpus)),
        )


def check_hardware(r: Report, system: System, asked: Asked) -> None:
    """Is there a GPU on the PCI bus, and whose?"""
    amd, nvidia = asked.amd, asked.nvidia
    if amd:
        seen = "; ".join(f"{g.slot} {g.name}" for g in amd)
        r.add("hardware", "AMD GPU on the PCI bus", PASS, seen)
    elif nvidia:
        seen = f"no AMD GPU; NVIDIA: {'; '.join(g.name for g in nvidia)}"
        r.add("hardware", "AMD GPU on the PCI bus", SKIP, seen)
    elif not system.path("/sys/bus/pci/devices").is_dir():
        r.add(
            "hardware",
            "AMD GPU on the PCI bus",
            WARN if asked.wants_amd else SKIP,
            "cannot read /sys/bus/pci (container without sysfs?)",
            "Run on the host, or start the container with /sys mounted."
            if asked.wants_amd
            else None,
        )
    else:
        r.add(
            "hardware",
            "GPU on the PCI bus",
            FAIL if asked.wants_gpu else SKIP,
            "no GPU on the PCI bus: CPU only",
            "Check the card is seated and powered (`lspci | grep -iE 'vga|display|accel'`); "
            "in a VM or container, pass the GPU through."
            if asked.wants_gpu
            else None,
        )


def check_driver(r: Report, system: System, asked: Asked) -> None:
    """The amdgpu module, and /dev/kfd and the render nodes readable by this user."""
    if not asked.amd:
        r.add("driver", "amdgpu, /dev/kfd, /dev/dri", SKIP, "no AMD GPU")
        return
    if system.amdgpu_loaded():
        r.add("driver", "amdgpu kernel module", PASS, "loaded")
    else:
        r.add(
            "driver",
            "amdgpu kernel module",
            FAIL,
            "not loaded (/sys/module/amdgpu missing)",
            "Load it: `sudo modprobe amdgpu`; if that fails install the driver of your ROCm "
            "release (amdgpu-dkms) and read `sudo dmesg | grep -i amdgpu`.",
        )
    groups = system.user_groups()
    kfd = system.path("/dev/kfd")
    if not kfd.exists():
        r.add(
            "driver",
            "/dev/kfd",
            FAIL,
            "missing",
            "The ROCm kernel driver (KFD) is not active: load amdgpu (above); in a container "
            "pass `--device=/dev/kfd --device=/dev/dri`.",
        )
    elif system.can_use(kfd):
        r.add("driver", "/dev/kfd", PASS, "present, read/write for this user")
    else:
        seen = (
            "present but not read/write for this user "
            f"(groups: {', '.join(sorted(groups)) or 'none'})"
        )
        r.add("driver", "/dev/kfd", FAIL, seen, _GROUP_FIX)
    _check_render_nodes(r, system)


def _check_render_nodes(r: Report, system: System) -> None:
    nodes = system.render_nodes()
    if not nodes:
        r.add(
            "driver",
            "/dev/dri/renderD*",
            FAIL,
            "no render nodes",
            "Load amdgpu; in a container pass `--device=/dev/dri`.",
        )
        return
    denied = [n.name for n in nodes if not system.can_use(n)]
    if denied:
        seen = f"not read/write for this user: {', '.join(denied)}"
        r.add("driver", "/dev/dri/renderD*", FAIL, seen, _GROUP_FIX)
    else:
        r.add("driver", "/dev/dri/renderD*", PASS, ", ".join(n.name for n in nodes))


def check_runtime(
    r: Report, system: System, asked: Asked
) -> tuple[tuple[str, str] | None, list[str]]:
    """The system ROCm, the GPU agents rocminfo (or the KFD topology) lists, and the SMI tool.

    Returns:
        The system ROCm as ``(version, file it was read from)`` or None, and the gfx names
        rocminfo or the KFD topology gave (empty without an AMD GPU).
    """
    rocm = system.rocm_version()
    if not asked.amd:
        r.add("runtime", "ROCm", SKIP, f"no AMD GPU{f'; ROCm {rocm[0]} installed' if rocm else ''}")
        return rocm, []
    if rocm:
        r.add("runtime", "ROCm version", PASS, f"ROCm {rocm[0]} ({rocm[1]})")
    else:
        r.add(
            "runtime",
            "ROCm version",
            WARN,
            "no system ROCm found ($ROCM_PATH, /opt/rocm)",
            "PyTorch's ROCm wheels bring their own runtime, so training can work without it; "
            "install ROCm for rocminfo/rocm-smi and the matching kernel driver.",
        )
    info_gfx = _check_rocminfo(r, system)
    smi = system.smi()
    if smi:
        r.add("runtime", "rocm-smi / amd-smi", PASS, smi)
    return rocm, info_gfx


def _check_rocminfo(r: Report, system: System) -> list[str]:
    got = system.rocminfo_gfx()
    if got is None:
        info_gfx = system.kfd_gfx()
        seen = f"rocminfo not installed; KFD topology: {', '.join(info_gfx) or 'no GPU nodes'}"
        r.add("runtime", "rocminfo agents", SKIP if info_gfx else WARN, seen)
        return info_gfx
    info_gfx, err = got
    if err:
        r.add(
            "runtime",
            "rocminfo agents",
            FAIL,
            f"rocminfo failed: {err}",
            fix_from_table(err, "Fix the driver layer above first."),
        )
    elif info_gfx:
        r.add("runtime", "rocminfo agents", PASS, ", ".join(info_gfx))
    else:
        r.add(
            "runtime",
            "rocminfo agents",
            FAIL,
            "rocminfo lists no GPU agent",
            "The runtime cannot see the card: fix the driver layer, or set "
            "HSA_OVERRIDE_GFX_VERSION for an unlisted card.",
        )
    return info_gfx
